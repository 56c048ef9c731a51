"""The `cutlass` backend: GEMMs and 2-D convolutions from CUTLASS 2.x templates on the cuda
device.

Conventions:
  * one glue module per model (`cutlass.cu`): every cutlass region, each call commented with
    its ONNX nodes, shapes and the instantiation chosen; it includes buildgen_abi.h and
    bg_cutlass.h, never a CUTLASS header;
  * the instantiations live in the manifest's kernel shards (`_shared/cutlass-<id>/`), one
    `extern "C"` launcher per distinct set of template parameters, named
    bg_cutlass_<op>_<12 hex digest>; one archive of the shards is linked by every model;
  * convolutions run in NHWC with KRSC filters reordered (and BatchNormalization folded)
    once at create; the region's NCHW tensors are transposed at its edge.
"""

from buildgen.backends.cutlass.backend import CutlassBackend

__all__ = ["CutlassBackend"]
