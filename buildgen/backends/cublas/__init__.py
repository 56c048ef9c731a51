"""The `cublas` backend: cuBLAS and cuBLASLt for MatMul (2-D, batched, broadcast against a
2-D operand) and Gemm, with the elementwise chain after them.

Conventions of the generated module (one per model, `cublas.cu`):
  * a header comment names the model, the source ONNX file (its base name), the compute type,
    the workspace, every cublas region with its calls, and the scratch it plans;
  * it includes <cublas_v2.h> and <cublasLt.h> (from the nvidia-cublas wheel, after nvcc's
    own headers) and "buildgen_abi.h"; exported functions have C linkage;
  * per region one exported `M__cublas_<region>` enqueuing, on env->stream, one call per
    group (a comment lists the ONNX nodes, M/N/K and what is fused): cublasLtMatmul with a
    bias/ReLU/GELU epilogue, or cublasGemmStridedBatchedEx, then the group's epilogue kernel;
  * M__cublas_create makes the cuBLAS and cuBLASLt handles (on the instance's stream) and
    every cuBLASLt descriptor, layout and algorithm once; runs allocate nothing.
"""

from buildgen.backends.cublas.backend import CublasBackend

__all__ = ["CublasBackend"]
