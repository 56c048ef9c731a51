"""The `cuda` device backend (rules/cuda.yaml): CUDA C++ kernels compiled by nvcc."""

from buildgen.backends.cuda.backend import CudaBackend

__all__ = ["CudaBackend"]
