/* Test harness: thin exported wrappers over bg_kernels.h for ctypes. Each wrapper gives the
 * kernel a deliberately misaligned, NaN-filled workspace of exactly the advertised size,
 * followed by a guard band, and returns 0 only if the guard is untouched afterwards.
 * `threads` > 1 runs the kernel on a thread pool of that size, made for the call (its
 * workers get workspaces of the same size from the pool). */
#define _GNU_SOURCE
#include "bg_kernels.h"

#include <stdlib.h>

#define GUARD_BYTES 256

typedef struct workspace {
    unsigned char *raw;
    unsigned char *start;
    size_t bytes;
} workspace;

static workspace ws_new(size_t bytes, size_t misalign)
{
    workspace w;
    w.raw = malloc(misalign + bytes + GUARD_BYTES);
    w.start = w.raw + misalign;
    w.bytes = bytes;
    memset(w.raw, 0xFF, misalign + bytes); /* all-ones floats are NaN */
    memset(w.start + bytes, 0xA5, GUARD_BYTES);
    return w;
}

/* Frees the workspace; 0 if the guard band is intact, 1 if the kernel wrote past the end. */
static int ws_free(workspace w)
{
    int bad = 0;
    for (size_t i = 0; i < GUARD_BYTES; ++i) bad |= w.start[w.bytes + i] != 0xA5;
    free(w.raw);
    return bad;
}

/* A pool of `threads` whose workers have `ws_bytes` each; NULL for one thread. */
static bg_threadpool *pool_new(int threads, size_t ws_bytes)
{
    char why[160];
    if (threads < 2) return NULL;
    bg_threadpool *pool = bg_threadpool_create(threads, ws_bytes, why, sizeof why);
    if (pool == NULL) abort();
    return pool;
}

static bg_epilogue make_ep(const float *bias, int bias_axis, int act, float act_alpha,
                           float act_beta)
{
    bg_epilogue ep = {bias, bias_axis, act, act_alpha, act_beta, NULL};
    return ep;
}

int h_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
            int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
            int use_ep, const float *bias, int bias_axis, int act, float act_alpha,
            float act_beta, int64_t misalign, int threads);
int h_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
            int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
            int use_ep, const float *bias, int bias_axis, int act, float act_alpha,
            float act_beta, int64_t misalign, int threads)
{
    const bg_epilogue ep = make_ep(bias, bias_axis, act, act_alpha, act_beta);
    workspace w = ws_new(bg_sgemm_workspace_bytes(M, N, K), (size_t)misalign);
    bg_threadpool *pool = pool_new(threads, w.bytes);
    bg_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, use_ep ? &ep : NULL,
             w.start, pool);
    bg_threadpool_destroy(pool);
    return ws_free(w);
}

/* h_sgemm through bg_sgemm_pack_b + bg_sgemm_prepacked (the packed B also guarded). */
int h_sgemm_prepacked(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                      float *C, int64_t ldc, int use_ep, const float *bias, int bias_axis,
                      int act, float act_alpha, float act_beta, int64_t misalign,
                      int threads);
int h_sgemm_prepacked(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                      float *C, int64_t ldc, int use_ep, const float *bias, int bias_axis,
                      int act, float act_alpha, float act_beta, int64_t misalign, int threads)
{
    const bg_epilogue ep = make_ep(bias, bias_axis, act, act_alpha, act_beta);
    /* The packed B is a float array: misalign it by whole floats only. */
    workspace packed = ws_new(bg_sgemm_packed_b_bytes(N, K), (size_t)misalign & ~(size_t)3);
    bg_sgemm_pack_b(tb, N, K, B, ldb, packed.start);
    workspace w = ws_new(bg_sgemm_workspace_bytes(M, N, K), (size_t)misalign);
    bg_threadpool *pool = pool_new(threads, w.bytes);
    bg_sgemm_prepacked(ta, M, N, K, alpha, A, lda, packed.start, beta, C, ldc,
                       use_ep ? &ep : NULL, w.start, pool);
    bg_threadpool_destroy(pool);
    return ws_free(w) | ws_free(packed);
}

/* p: N, C, H, W, M, OH, OW, KH, KW, group, stride_h, stride_w, dil_h, dil_w, pad_top,
 * pad_left (the field order of bg_conv2d_params). */
/* prepacked: filters through bg_conv2d_pack_weights + bg_conv2d_prepacked where they pack. */
int h_conv2d(const int64_t *p, const float *X, const float *Wt, int use_ep, const float *bias,
             int act, float act_alpha, float act_beta, float *Y, int64_t misalign,
             int prepacked, int threads);
int h_conv2d(const int64_t *p, const float *X, const float *Wt, int use_ep, const float *bias,
             int act, float act_alpha, float act_beta, float *Y, int64_t misalign,
             int prepacked, int threads)
{
    const bg_conv2d_params cp = {p[0], p[1], p[2],  p[3],  p[4],  p[5],  p[6],  p[7],
                                 p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15]};
    /* bias_axis 0 on purpose: the conv must treat the bias as per channel regardless. */
    const bg_epilogue ep = make_ep(bias, 0, act, act_alpha, act_beta);
    workspace w = ws_new(bg_conv2d_workspace_bytes(&cp), (size_t)misalign);
    const size_t packed_bytes = prepacked ? bg_conv2d_packed_bytes(&cp) : 0;
    bg_threadpool *pool = pool_new(threads, w.bytes);
    if (packed_bytes == 0) {
        bg_conv2d(&cp, X, Wt, use_ep ? &ep : NULL, Y, w.start, pool);
        bg_threadpool_destroy(pool);
        return ws_free(w);
    }
    workspace packed = ws_new(packed_bytes, (size_t)misalign & ~(size_t)3);
    bg_conv2d_pack_weights(&cp, Wt, packed.start);
    bg_conv2d_prepacked(&cp, X, packed.start, use_ep ? &ep : NULL, Y, w.start, pool);
    bg_threadpool_destroy(pool);
    return ws_free(w) | ws_free(packed);
}

/* p: N, C, H, W, OH, OW, KH, KW, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left,
 * pad_bottom, pad_right. */
void h_pool2d(const int64_t *p, int count_include_pad, int is_max, const float *X, float *Y,
              int threads);
void h_pool2d(const int64_t *p, int count_include_pad, int is_max, const float *X, float *Y,
              int threads)
{
    bg_pool2d_params pp = {p[0], p[1], p[2],  p[3],  p[4],  p[5],  p[6],  p[7],  p[8],
                           p[9], p[10], p[11], p[12], p[13], count_include_pad, p[14], p[15]};
    bg_threadpool *pool = pool_new(threads, 0);
    if (is_max)
        bg_maxpool2d(&pp, X, Y, pool);
    else
        bg_avgpool2d(&pp, X, Y, pool);
    bg_threadpool_destroy(pool);
}

/* The 8-lane activations on n values (n a multiple of 8), for accuracy tests. */
void h_act8(int act, float act_alpha, float act_beta, float *v, int64_t n);
void h_act8(int act, float act_alpha, float act_beta, float *v, int64_t n)
{
    const bg_epilogue ep = make_ep(NULL, 0, act, act_alpha, act_beta);
    for (int64_t i = 0; i + 8 <= n; i += 8) {
        bg_v8f x;
        BG_LOAD8(x, v + i);
        bg__act8(&x, &ep);
        BG_STORE8(v + i, x);
    }
}

/* bg_math.h on n values: which = 0 exp, 1 tanh, 2 erf, 3 sigmoid; y may alias x. The loop
 * is the shape generated elementwise code has, so the vectorised form is what is tested. */
void h_math(int which, const float *x, float *y, int64_t n);
void h_math(int which, const float *x, float *y, int64_t n)
{
    switch (which) {
    case 0: for (int64_t i = 0; i < n; ++i) y[i] = bg_expf(x[i]); break;
    case 1: for (int64_t i = 0; i < n; ++i) y[i] = bg_tanhf(x[i]); break;
    case 2: for (int64_t i = 0; i < n; ++i) y[i] = bg_erff(x[i]); break;
    case 3: for (int64_t i = 0; i < n; ++i) y[i] = bg_sigmoidf(x[i]); break;
    case 4: for (int64_t i = 0; i < n; ++i) y[i] = bg_hardswishf(x[i]); break;
    case 5: for (int64_t i = 0; i < n; ++i) y[i] = bg_hardsigmoidf(x[i], 0.3f, 0.4f); break;
    /* the two-operand helpers pair x[i] with x[n - 1 - i] */
    case 6: for (int64_t i = 0; i < n; ++i) y[i] = bg_fmaxf(x[i], x[n - 1 - i]); break;
    default: for (int64_t i = 0; i < n; ++i) y[i] = bg_fminf(x[i], x[n - 1 - i]); break;
    }
}

/* bg_transpose2d: Y[a * ldy + b] = X[b * ldx + a] for a < rows, b < cols. */
void h_transpose2d(const void *x, void *y, int64_t rows, int64_t cols, int64_t ldx, int64_t ldy,
                   int64_t size);
void h_transpose2d(const void *x, void *y, int64_t rows, int64_t cols, int64_t ldx, int64_t ldy,
                   int64_t size)
{
    bg_transpose2d(x, y, rows, cols, ldx, ldy, (size_t)size);
}

void *h_alloc_constants(size_t bytes);
void *h_alloc_constants(size_t bytes)
{
    return bg_alloc_constants(bytes);
}
