// The runtime calls of the CPU stand-in (cuda_runtime.h): device memory is host memory.
#include <cstdlib>
#include <cstring>

#include "cuda_runtime.h"

extern "C" {
cudaError_t cudaGetDeviceCount(int *count) { *count = 1; return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned)
{
    static int token;
    *stream = &token;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaMalloc(void **ptr, size_t bytes)
{
    *ptr = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    // Garbage, not zeros, so a read before a write shows up as a wrong result.
    if (*ptr) std::memset(*ptr, 0x7f, (bytes + 255) / 256 * 256);
    return *ptr ? cudaSuccess : 2;
}
cudaError_t cudaFree(void *ptr) { std::free(ptr); return cudaSuccess; }
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind,
                            cudaStream_t)
{
    std::memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind, cudaStream_t)
{
    for (size_t row = 0; row < height; ++row)
        std::memmove(static_cast<char *>(dst) + row * dpitch,
                     static_cast<const char *>(src) + row * spitch, width);
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t) { return "emulated CUDA error"; }
}
