"""The `cudnn` backend: cuDNN 9 (its legacy descriptor API, still in cudnn_cnn.h and
cudnn_ops.h) for 1-D and 2-D Conv with the elementwise chain after it, pooling and softmax.

Conventions of the generated module (one per model, `cudnn.cu`):
  * a header comment names the model, the source ONNX file (its base name), the math mode,
    the workspace limit, every cudnn region with its calls, and the scratch it plans;
  * it includes <cudnn.h> (from the nvidia-cudnn-cu13 wheel, after nvcc's own headers) and
    "buildgen_abi.h"; exported functions have C linkage;
  * constants it derives (a folded BatchNormalization's weight scale and bias, a bias with a
    per-channel Add folded in) are `__device__` arrays `k<n>_scale`, `k<n>_bias`;
  * per region one exported `M__cudnn_<region>` enqueuing, on env->stream, one call per
    group (a comment lists the ONNX nodes and what is fused), then its epilogue kernel;
  * M__cudnn_create makes the handle (on the instance's stream), every descriptor and each
    convolution's algorithm (cuDNN's heuristics, or its timings with `algorithm_search:
    benchmark`, within the workspace limit) once, and scales folded weights into a device
    copy; runs allocate nothing.
"""

from buildgen.backends.cudnn.backend import CudnnBackend

__all__ = ["CudnnBackend"]
