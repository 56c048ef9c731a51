"""The `openblas` backend: OpenBLAS's cblas_sgemm under MatMul, Gemm and Conv.

Conventions of the generated module (one per model, `openblas.c`):
  * a header comment names the model, the source ONNX file (its base name), the OpenBLAS
    build and thread count, every openblas region with its ops, and the scratch plan;
  * it includes <cblas.h> (from the library's prefix, found at gen), "buildgen_abi.h" and
    "bg_openblas.h" (im2col); calls carry the library's symbol prefix (`scipy_cblas_sgemm`
    for PyPI scipy-openblas32);
  * one `static void k<n>_<ops>(...)` per group (an anchor with its fused epilogue),
    preceded by a comment listing the ONNX nodes it implements with their shapes; its body
    is the sgemm call(s) and one loop nest applying bias, BatchNormalization (as constant
    per-channel scale/shift arrays), residuals and activations;
  * per region `int M__openblas_<region>(bg_env *env, const void *const *in,
    void *const *out)` binds named pointers (in[], out[], weights at env->weights + offset,
    intermediates and im2col buffers at env->scratch + offset) and calls the kernels;
  * the thread count (attribute `threads`) is set before each region, since OpenBLAS keeps
    it process-wide; M__openblas_create starts the threads; nothing is allocated.
"""

from buildgen.backends.openblas.backend import OpenBLASBackend

__all__ = ["OpenBLASBackend"]
