/* bg_gemv.h — the M == 1 / N == 1 paths of bg_sgemm (part of bg_kernels.h).
 *
 * A matrix-vector product is memory-bound: every matrix element is used once, so packing
 * it (as the blocked path does) would double the traffic. These loops stream the matrix
 * in place in whichever of two forms its layout allows:
 *   axpy form  y[0:L] += x[k] * row_k     (matrix stored [K, L])
 *   dot form   y[l] = dot(row_l, x)        (matrix stored [L, K])
 */
#ifndef BG_GEMM_H
#error "include bg_kernels.h, not bg_gemv.h"
#endif

/* Workspace floats: a contiguous copy of the vector operand (K) and the result (L). */
static inline int64_t bg__gemv_floats(int64_t M, int64_t N, int64_t K)
{
    if (M != 1 && N != 1) return 0;
    const int64_t L = M == 1 ? N : M;
    return bg__round_up(K, 16) + L;
}

/* y[0:L] = sum_k x[k] * mat[k*ld + 0:L], eight rows of the matrix per pass over y (so y's
 * load/store traffic is an eighth of the matrix's). Vectors of the native width (bg_vnf):
 * these loops are memory-bound, and a vector without a register of its size would add a
 * stack round trip to every step. */
static inline void bg__gemv_axpy(int64_t L, int64_t K, const float *mat, int64_t ld,
                                 const float *x, float *y)
{
    for (int64_t l = 0; l < L; ++l) y[l] = 0.0f;
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        const float *m0 = mat + k * ld;
        bg_vnf xs[8];
        for (int r = 0; r < 8; ++r) xs[r] = BG_SPLATN(x[k + r]);
        int64_t l = 0;
        for (; l + BG_VN <= L; l += BG_VN) {
            bg_vnf acc, row;
            BG_LOADN(acc, y + l);
            for (int r = 0; r < 8; ++r) {
                BG_LOADN(row, m0 + r * ld + l);
                acc = BG_FMAN(xs[r], row, acc);
            }
            BG_STOREN(y + l, acc);
        }
        for (; l < L; ++l)
            for (int r = 0; r < 8; ++r) y[l] += x[k + r] * m0[r * ld + l];
    }
    if (k < K) { /* the last K % 8 rows: one pass over y */
        const int rows = (int)(K - k);
        const float *m0 = mat + k * ld;
        for (int64_t l = 0; l < L; ++l) {
            float s = y[l];
            for (int r = 0; r < rows; ++r) s += x[k + r] * m0[r * ld + l];
            y[l] = s;
        }
    }
}

/* y[l] = dot(mat[l*ld + 0:K], x) with two native-width accumulators per row. */
static inline void bg__gemv_dot(int64_t L, int64_t K, const float *mat, int64_t ld,
                                const float *x, float *y)
{
    for (int64_t l = 0; l < L; ++l) {
        const float *row = mat + l * ld;
        bg_vnf s0 = BG_SPLATN(0.0f), s1 = s0;
        int64_t k = 0;
        for (; k + 2 * BG_VN <= K; k += 2 * BG_VN) {
            bg_vnf r0, r1, v0, v1;
            BG_LOADN(r0, row + k);
            BG_LOADN(r1, row + k + BG_VN);
            BG_LOADN(v0, x + k);
            BG_LOADN(v1, x + k + BG_VN);
            s0 = BG_FMAN(r0, v0, s0);
            s1 = BG_FMAN(r1, v1, s1);
        }
        s0 += s1;
        float s = BG_HSUMN(s0);
        for (; k < K; ++k) s += row[k] * x[k];
        y[l] = s;
    }
}

/* One matrix-vector product, as bg__gemv sets it up for its tasks. */
typedef struct bg__gemv_job {
    int64_t L, K;
    const float *mat, *xv;
    int64_t ld;
    int axpy;
    float alpha, beta;
    float *C, *y;
    int64_t cs; /* stride between consecutive results in C */
    int along;  /* the epilogue's bias and scale vary along the results, else one value */
    const bg_epilogue *ep;
    int64_t chunk; /* results per task, a multiple of 8 */
} bg__gemv_job;

/* Results [l0, l0 + chunk): a chunk starts on a multiple of 8, so each result takes the
 * same vector or scalar path as in one pass over [0, L). */
static void bg__gemv_task(const void *ctx, int64_t task, void *ws)
{
    const bg__gemv_job *j = (const bg__gemv_job *)ctx;
    (void)ws;
    const int64_t l0 = task * j->chunk, n = bg__min64(j->chunk, j->L - l0);
    float *y = j->y + l0;
    if (j->axpy)
        bg__gemv_axpy(n, j->K, j->mat + l0, j->ld, j->xv, y);
    else
        bg__gemv_dot(n, j->K, j->mat + l0 * j->ld, j->ld, j->xv, y);
    for (int64_t l = 0; l < n; ++l) {
        float v = j->alpha * y[l];
        if (j->beta != 0.0f) v += j->beta * j->C[(l0 + l) * j->cs];
        y[l] = v;
    }
    if (bg__epilogue_active(j->ep)) {
        const bg_epilogue *ep = j->ep;
        bg__row_affine r = {NULL, NULL, 1.0f, 0.0f};
        if (j->along) {
            r.bias_vec = ep->bias ? ep->bias + l0 : NULL;
            r.scale_vec = ep->scale ? ep->scale + l0 : NULL;
        } else {
            r.bias_scalar = ep->bias ? ep->bias[0] : 0.0f;
            r.scale_scalar = ep->scale ? ep->scale[0] : 1.0f;
        }
        bg__epilogue_row(y, n, &r, ep);
    }
    for (int64_t l = 0; l < n; ++l) j->C[(l0 + l) * j->cs] = y[l];
}

/* Below this many multiply-adds a matrix-vector product runs on one thread. */
#define BG_GEMV_PARALLEL_MIN_MACS (64 * 1024)

/* bg_sgemm for M == 1 or N == 1 (the result is one row or one column of C). */
BG_API void bg__gemv(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                     const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                     float *C, int64_t ldc, const bg_epilogue *ep, float *ws, bg_threadpool *pool)
{
    const int row = M == 1; /* else N == 1: the result is a column */
    const int64_t L = row ? N : M;
    /* The vector operand: op(A)[0, :] for a row result, op(B)[:, 0] for a column. */
    const float *xv = row ? A : B;
    const int64_t xs = row ? (trans_a ? lda : 1) : (trans_b ? 1 : ldb);
    float *x = ws;
    if (xs != 1) {
        for (int64_t k = 0; k < K; ++k) x[k] = xv[k * xs];
        xv = x;
    }
    bg__gemv_job job = {
        .L = L, .K = K, .xv = xv,
        /* The matrix operand and whether its rows run along L (axpy form) or along K (dot). */
        .mat = row ? B : A, .ld = row ? ldb : lda, .axpy = row ? !trans_b : trans_a,
        .alpha = alpha, .beta = beta, .C = C, .y = ws + bg__round_up(K, 16),
        .cs = row ? 1 : ldc,
        /* Bias and scale along L when their axis is the one that varies, else one value. */
        .along = ep && ep->bias_axis == (row ? 0 : 1), .ep = ep, .chunk = L};
    const int threads = bg_threadpool_threads(pool);
    if (threads > 1 && L * K >= BG_GEMV_PARALLEL_MIN_MACS && L >= 16) {
        /* Two chunks per thread, whole 8-result vectors each. */
        job.chunk = bg__round_up((L + 2 * threads - 1) / (2 * threads), 8);
    }
    bg_parallel(pool, (L + job.chunk - 1) / job.chunk, bg__gemv_task, &job, NULL);
}
