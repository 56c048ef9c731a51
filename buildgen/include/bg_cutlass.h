/* The calling convention between a model's cutlass module (glue, no CUTLASS headers) and
 * the manifest-wide kernel shards that instantiate CUTLASS templates.
 *
 * Each instantiation is one `extern "C"` launcher named by a digest of its template
 * parameters, bg_cutlass_gemm_<12 hex> or bg_cutlass_conv2d_<12 hex>; it checks that the
 * kernel can run the problem (alignment, workspace), enqueues it on `stream` and returns 0,
 * or writes a message to `error` and returns non-zero. All pointers are device pointers;
 * element counts and strides are in elements (float).
 */
#ifndef BG_CUTLASS_H
#define BG_CUTLASS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

/* D = alpha * op(A) op(B) + beta * C, row-major D (m x n, leading dimension ldd).
 * A is m x k (row-major, lda) or its transpose; B is k x n or its transpose, as the
 * instantiation's layouts say. C may be a bias row (ldc = 0) or null with beta = 0.
 * batch > 1: `batch` independent GEMMs at the given batch strides. split_k > 1: serial
 * split-K over `split_k` slices (needs workspace; never combined with batch > 1). */
typedef struct bg_cutlass_gemm_args {
    int m, n, k;
    int batch;
    int split_k;
    float alpha, beta;
    const float *a, *b, *c;
    float *d;
    int64_t lda, ldb, ldc, ldd;
    int64_t stride_a, stride_b, stride_c, stride_d;
    void *workspace;
    size_t workspace_bytes;
} bg_cutlass_gemm_args;

/* Y = act(alpha * conv(X, W) + beta * bias): X is NHWC, W is KRSC, Y is NPQK; bias holds K
 * values broadcast over N, P, Q (null with beta = 0). Symmetric padding. */
typedef struct bg_cutlass_conv2d_args {
    int n, h, w, c;
    int k, r, s;
    int p, q;
    int pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;
    float alpha, beta;
    const float *x, *filter, *bias;
    float *y;
    void *workspace;
    size_t workspace_bytes;
} bg_cutlass_conv2d_args;

#endif
