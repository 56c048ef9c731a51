/* buildgen module ABI: how a model's executor calls the backend modules it links.
 *
 * Each backend module (one translation unit per backend per model) exports, for a model
 * named M and a backend named B:
 *
 *   const size_t M__B_scratch_bytes;            scratch it needs inside the model's arena
 *   int  M__B_create(bg_env *env);              once per model instance (may set env->state)
 *   void M__B_destroy(bg_env *env);
 *   int  M__B_<region>(bg_env *env, const void *const *in, void *const *out);
 *
 * (each name through BG_EXPORT, below, in a module compiled once per ISA level).
 *
 * A region function reads its inputs (tensors produced outside the region, in the
 * region's input order) and writes its outputs (tensors used outside it). Weights are
 * not passed: the module addresses them as env->weights + offset. Every function returns
 * 0 on success, or non-zero after writing a message to env->error.
 *
 * Device backends (a kind whose device is `cuda`: the cuda device itself and its external
 * codegens such as cublas, cudnn, cutlass):
 *   - a region's `in` and `out` pointers are DEVICE pointers (the executor copies tensors
 *     between host and device where a host region or the caller's buffers need them);
 *   - env->weights is the device copy of the weights blob, uploaded once by the executor's
 *     create (same offsets as the host blob; cudaMalloc aligns it to 256 bytes);
 *   - env->scratch is device memory: this backend's scratch inside the device arena;
 *   - all work is enqueued on env->stream (the model instance's cudaStream_t, created by the
 *     executor before any module's create). A region need not synchronize: the executor
 *     synchronizes the stream once before its run returns;
 *   - a failing CUDA call makes the function return non-zero after writing to env->error a
 *     message naming the call and the region, e.g. "cublasSgemm failed in region r3: ...".
 * For CPU backends env->stream is NULL and every pointer is a host pointer.
 */
#ifndef BUILDGEN_ABI_H
#define BUILDGEN_ABI_H

/* A module compiled once per instruction-set level (a kind's rules `isa_variants`) is
 * compiled with -DBG_ISA_SUFFIX=__isa_x86_64_v3 and so on: its exported names end with the
 * level, so that the variants link side by side and the executor picks one at create. */
#ifdef BG_ISA_SUFFIX
#define BG__ISA_PASTE2(name, suffix) name##suffix
#define BG__ISA_PASTE(name, suffix) BG__ISA_PASTE2(name, suffix)
#define BG_EXPORT(name) BG__ISA_PASTE(name, BG_ISA_SUFFIX)
#else
#define BG_EXPORT(name) name
#endif

#include <stddef.h>
#include <stdint.h>

typedef struct bg_env {
    const unsigned char *weights; /* the model's weights blob, 64-byte aligned */
    unsigned char *scratch;       /* this backend's scratch, 64-byte aligned */
    void *state;                  /* backend-owned, set by create */
    char *error;                  /* the model's last_error buffer */
    size_t error_size;
    int num_threads;              /* from the backend's target attributes; 0 = library default */
    void *stream; /* the model instance's cudaStream_t for device (cuda) backends; NULL for CPU backends */
} bg_env;

/* Kernel times, in a library built with profile: true (the host's attribute), from the
 * modules of a kind whose rules say `kernel_times: true` (c, onednn). Such a module also
 * exports
 *
 *   bg_kernel_times M__B_kernel_times(const bg_env *env);
 *
 * giving its kernels in run order: a label each ("r0 k3_conv_relu: Conv 'c1', Relu 'r1'
 * -> [1,16,32,32]": region, kernel, the ONNX nodes it runs, its output's shape; printable
 * ASCII), and the instance's counters, nanoseconds summed over the runs since create, which
 * the executor reads and clears (<model>_profile_kernel_seconds, <model>_profile_reset). */
typedef struct bg_kernel_times {
    int count;
    const char *const *labels;
    uint64_t *ns; /* NULL before create */
} bg_kernel_times;

#endif
