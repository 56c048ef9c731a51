"""The `onednn` backend: oneDNN (3.x, C API) primitives for Conv, MatMul, Gemm, pooling,
softmax, layer normalization, LRN, resampling (Resize, Upsample) and RNN cells (LSTM, GRU,
RNN).

Conventions of the generated module (one per model, `onednn.c`):
  * a header comment names the model, the source ONNX file (its base name), threads, fpmath
    mode, every onednn region with its primitive groups, and the arena it plans;
  * it includes "buildgen_abi.h" and "bg_onednn_ops.h" (the small runtime that creates
    primitives, picks layouts and records steps: bg_onednn.h, bg_onednn_layout.h, and the
    helpers' parts bg_onednn_unary.h and bg_onednn_pieces.h), which
    include <oneapi/dnnl/dnnl.h> from the prefix found at gen; a module with an LSTM, GRU
    or RNN also includes "bg_onednn_rnn.h";
  * per region: an enum naming each tensor it touches, a bg_dnnl_tensor_spec table saying
    where each lives (in[], out[], or the arena at a planned offset) and whether it may keep
    a blocked layout, `create_<region>` building one primitive group per block (a comment
    lists the ONNX nodes it implements; a constant spec and post-ops say what to build),
    and `M__onednn_<region>`, which executes the recorded steps;
  * constants a group derives (a BatchNormalization folded into a Conv's weights and bias,
    Gemm's alpha or beta * C) are `static const float k<n>_<what>[]` arrays;
  * M__onednn_create builds everything once, with the target's thread count (OpenMP) and
    fpmath mode; runs set the same thread count and allocate nothing.
"""

from buildgen.backends.onednn.backend import OneDNNBackend

__all__ = ["OneDNNBackend"]
