/* A CPU stand-in for the CUDA runtime, for tests on machines without a GPU.
 *
 * It declares the runtime calls buildgen's executor (model.c, C) and cuda module (cuda.cu,
 * compiled here as C++ after its launches are rewritten, see emulate.py) make; device
 * memory is host memory and a stream runs everything at once. Kernels run their threads
 * one after another, or (kernels that call __syncthreads) as fibers that hand over at each
 * barrier. It checks the generated code's logic and indexing, not the GPU.
 */
#ifndef BG_EMU_CUDA_RUNTIME_H
#define BG_EMU_CUDA_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

typedef int cudaError_t;
typedef void *cudaStream_t;
enum { cudaSuccess = 0, cudaErrorNoDevice = 100 };
enum cudaMemcpyKind {
    cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
    cudaMemcpyDeviceToDevice
};
#define cudaStreamNonBlocking 1u

#ifdef __cplusplus
extern "C" {
#endif
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t err);
#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
#include <ucontext.h>

#include <functional>
#include <vector>

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

#define __global__
#define __shared__ static  /* blocks run one at a time: a static is the block's */
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

/* A kernel that calls __syncthreads runs its block's threads as fibers (ucontext) on one
 * OS thread: each runs until its next __syncthreads, then hands over to the next; after the
 * last, the first resumes, so every thread has reached the barrier. Cheaper by far than
 * one OS thread per CUDA thread on a 2-core machine. */
struct bg_emu_fibers {
    std::vector<ucontext_t> context;
    std::vector<std::vector<char>> stacks;
    std::vector<dim3> thread, block;
    ucontext_t main;
    std::function<void()> body;
    unsigned count = 0;
};
inline bg_emu_fibers *bg_emu_current = nullptr;

inline void bg_emu_switch(unsigned from, unsigned to)
{
    bg_emu_fibers *f = bg_emu_current;
    f->block[from] = blockIdx;
    swapcontext(&f->context[from], &f->context[to]);
    threadIdx = f->thread[from];  /* back in fiber `from` */
    blockIdx = f->block[from];
}

inline unsigned bg_emu_me()
{
    return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
}

inline void __syncthreads()
{
    unsigned me = bg_emu_me();
    bg_emu_switch(me, (me + 1) % bg_emu_current->count);
}

inline void bg_emu_fiber(int index)
{
    bg_emu_fibers *f = bg_emu_current;
    unsigned me = (unsigned)index;
    threadIdx = f->thread[me];
    for (unsigned bz = 0; bz < gridDim.z; ++bz)
        for (unsigned by = 0; by < gridDim.y; ++by)
            for (unsigned bx = 0; bx < gridDim.x; ++bx) {
                blockIdx = dim3(bx, by, bz);
                f->body();
                __syncthreads();  /* the block ends for every thread before the next */
            }
    /* Fibers finish in order; the last returns to the launch. */
    setcontext(me + 1 == f->count ? &f->main : &f->context[me + 1]);
}

/* Run `body` once per CUDA thread of the grid. `threaded`: the kernel calls
 * __syncthreads (run as fibers); else each thread runs its blocks in turn. */
template <class Body>
void bg_emu_launch(dim3 grid, dim3 block, bool threaded, Body body)
{
    gridDim = grid;
    blockDim = block;
    unsigned threads = block.x * block.y * block.z;
    if (!threaded) {
        for (unsigned t = 0; t < threads; ++t) {
            threadIdx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
            for (unsigned bz = 0; bz < grid.z; ++bz)
                for (unsigned by = 0; by < grid.y; ++by)
                    for (unsigned bx = 0; bx < grid.x; ++bx) {
                        blockIdx = dim3(bx, by, bz);
                        body();
                    }
        }
        return;
    }
    bg_emu_fibers f;
    f.count = threads;
    f.body = body;
    f.context.resize(threads);
    f.stacks.resize(threads);
    f.thread.resize(threads);
    f.block.resize(threads);
    bg_emu_current = &f;
    for (unsigned t = 0; t < threads; ++t) {
        f.thread[t] = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
        f.stacks[t].resize(64 * 1024);
        getcontext(&f.context[t]);
        f.context[t].uc_stack.ss_sp = f.stacks[t].data();
        f.context[t].uc_stack.ss_size = f.stacks[t].size();
        f.context[t].uc_link = nullptr;
        makecontext(&f.context[t], (void (*)())bg_emu_fiber, 1, (int)t);
    }
    swapcontext(&f.main, &f.context[0]);
    bg_emu_current = nullptr;
}
#endif

#endif
