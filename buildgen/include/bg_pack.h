/* bg_pack.h — packing for bg_sgemm (part of bg_kernels.h; include that instead).
 *
 * Packing copies the current blocks of op(A) and op(B) into the contiguous, zero-padded
 * micro-panel order the micro-kernel streams through, resolving transposes on the way.
 * Transposing copies go through 8x8 (B) and MRx8 (A) register transposes where the compiler
 * offers lane shuffles; everything else is plain loops.
 */
#ifndef BG_GEMM_H
#error "include bg_kernels.h, not bg_pack.h"
#endif

/* Where op(B) comes from: a plain matrix, an image read through an implicit im2col (for
 * convolution), panels packed ahead of time, or rows read in place. `pack` writes columns
 * [j0, j0+nc) of rows [k0, k0+kc) as NR-wide micro-panels (panel p at dst + p*kc*NR, row k
 * at +k*NR), zero-padding the last panel; it is NULL when data is already packed
 * (bg_sgemm_pack_b) or read in place through `rows`: then B(k, j) = data[rows[k] + j], and
 * data[rows[k] + j] must be readable (its value is ignored) up to j = round_up(N, NR) - 1,
 * since every tile reads whole NR-wide rows (a stride-1 convolution over a padded image,
 * bg_conv.h). */
typedef struct bg__bsrc bg__bsrc;
struct bg__bsrc {
    void (*pack)(const bg__bsrc *s, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float *dst);
    const float *data; /* B, the image for im2col, or the prepacked panels */
    int64_t ld;        /* leading dimension of B */
    int trans;         /* B is stored [N, K] */
    const void *ctx;   /* im2col: its bg__im2col */
    const int64_t *rows; /* NULL, or where each row of B starts in data (pack is NULL) */
    /* pack is bg__pack_b_matrix: B is a plain matrix, which the micro-kernel may read in
     * place. A flag, not a comparison of pack with the function: the convolution's kernels
     * object has a copy of its own (bg_kernels_linked.h). */
    int matrix;
    /* With rows, 0: B(k, j) = data[rows[k] + j]. Else B's columns come in runs of
     * row_width (a multiple of the vector width) row_stride apart: B(k, j) =
     * data[rows[k] + j / row_width * row_stride + j % row_width] (the shifted convolution
     * computing only the output's columns, bg_conv.h). */
    int64_t row_width, row_stride;
};

#ifdef BG_HAVE_SHUFFLEVECTOR
/* dst[k*ldd + j] = src[j*ld + k] for j, k < 8: the unpack / shuffle / 128-bit-lane
 * transpose, 24 shuffles instead of 64 scalar moves. */
static inline void bg__transpose8x8(const float *src, int64_t ld, float *dst, int64_t ldd)
{
    bg_v8f r0, r1, r2, r3, r4, r5, r6, r7;
    BG_LOAD8(r0, src);
    BG_LOAD8(r1, src + ld);
    BG_LOAD8(r2, src + 2 * ld);
    BG_LOAD8(r3, src + 3 * ld);
    BG_LOAD8(r4, src + 4 * ld);
    BG_LOAD8(r5, src + 5 * ld);
    BG_LOAD8(r6, src + 6 * ld);
    BG_LOAD8(r7, src + 7 * ld);
    const bg_v8f t0 = BG__SHUF(r0, r1, 0, 8, 1, 9, 4, 12, 5, 13);
    const bg_v8f t1 = BG__SHUF(r0, r1, 2, 10, 3, 11, 6, 14, 7, 15);
    const bg_v8f t2 = BG__SHUF(r2, r3, 0, 8, 1, 9, 4, 12, 5, 13);
    const bg_v8f t3 = BG__SHUF(r2, r3, 2, 10, 3, 11, 6, 14, 7, 15);
    const bg_v8f t4 = BG__SHUF(r4, r5, 0, 8, 1, 9, 4, 12, 5, 13);
    const bg_v8f t5 = BG__SHUF(r4, r5, 2, 10, 3, 11, 6, 14, 7, 15);
    const bg_v8f t6 = BG__SHUF(r6, r7, 0, 8, 1, 9, 4, 12, 5, 13);
    const bg_v8f t7 = BG__SHUF(r6, r7, 2, 10, 3, 11, 6, 14, 7, 15);
    const bg_v8f u0 = BG__SHUF(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13);
    const bg_v8f u1 = BG__SHUF(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);
    const bg_v8f u2 = BG__SHUF(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13);
    const bg_v8f u3 = BG__SHUF(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);
    const bg_v8f u4 = BG__SHUF(t4, t6, 0, 1, 8, 9, 4, 5, 12, 13);
    const bg_v8f u5 = BG__SHUF(t4, t6, 2, 3, 10, 11, 6, 7, 14, 15);
    const bg_v8f u6 = BG__SHUF(t5, t7, 0, 1, 8, 9, 4, 5, 12, 13);
    const bg_v8f u7 = BG__SHUF(t5, t7, 2, 3, 10, 11, 6, 7, 14, 15);
    const bg_v8f c0 = BG__SHUF(u0, u4, 0, 1, 2, 3, 8, 9, 10, 11);
    const bg_v8f c1 = BG__SHUF(u1, u5, 0, 1, 2, 3, 8, 9, 10, 11);
    const bg_v8f c2 = BG__SHUF(u2, u6, 0, 1, 2, 3, 8, 9, 10, 11);
    const bg_v8f c3 = BG__SHUF(u3, u7, 0, 1, 2, 3, 8, 9, 10, 11);
    const bg_v8f c4 = BG__SHUF(u0, u4, 4, 5, 6, 7, 12, 13, 14, 15);
    const bg_v8f c5 = BG__SHUF(u1, u5, 4, 5, 6, 7, 12, 13, 14, 15);
    const bg_v8f c6 = BG__SHUF(u2, u6, 4, 5, 6, 7, 12, 13, 14, 15);
    const bg_v8f c7 = BG__SHUF(u3, u7, 4, 5, 6, 7, 12, 13, 14, 15);
    BG_STORE8(dst, c0);
    BG_STORE8(dst + ldd, c1);
    BG_STORE8(dst + 2 * ldd, c2);
    BG_STORE8(dst + 3 * ldd, c3);
    BG_STORE8(dst + 4 * ldd, c4);
    BG_STORE8(dst + 5 * ldd, c5);
    BG_STORE8(dst + 6 * ldd, c6);
    BG_STORE8(dst + 7 * ldd, c7);
}
#endif

static inline void bg__pack_b_matrix(const bg__bsrc *s, int64_t k0, int64_t kc, int64_t j0,
                                     int64_t nc, float *dst)
{
    const int64_t NR = BG_GEMM_NR, ld = s->ld;
    for (int64_t jp = 0; jp < nc; jp += NR, dst += kc * NR) {
        const int64_t nr = nc - jp < NR ? nc - jp : NR;
        if (!s->trans) {
            const float *src = s->data + k0 * ld + j0 + jp;
            if (nr == NR) /* a constant size: the copy becomes three vector moves */
                for (int64_t k = 0; k < kc; ++k)
                    memcpy(dst + k * NR, src + k * ld, BG_GEMM_NR * sizeof(float));
            else
                for (int64_t k = 0; k < kc; ++k) {
                    memcpy(dst + k * NR, src + k * ld, (size_t)nr * sizeof(float));
                    for (int64_t j = nr; j < NR; ++j) dst[k * NR + j] = 0.0f;
                }
        } else {
            /* B stored [N, K]: transpose 8x8 blocks, then read each remaining column of
             * op(B) contiguously and scatter it by NR. */
            int64_t k_done = 0;
#ifdef BG_HAVE_SHUFFLEVECTOR
            if (nr == NR) {
                k_done = kc / 8 * 8;
                const float *src = s->data + (j0 + jp) * ld + k0;
                for (int64_t k = 0; k < k_done; k += 8)
                    for (int64_t j = 0; j < NR; j += 8)
                        bg__transpose8x8(src + j * ld + k, ld, dst + k * NR + j, NR);
            }
#endif
            for (int64_t j = 0; j < NR; ++j) {
                if (j < nr) {
                    const float *src = s->data + (j0 + jp + j) * ld + k0;
                    for (int64_t k = k_done; k < kc; ++k) dst[k * NR + j] = src[k];
                } else {
                    for (int64_t k = k_done; k < kc; ++k) dst[k * NR + j] = 0.0f;
                }
            }
        }
    }
}

#ifdef BG_HAVE_SHUFFLEVECTOR
/* dst[k*4 + i] = src[i*ld + k] for i < 4, k < 8: four rows become 32 contiguous floats. */
static inline void bg__transpose4x8(const float *src, int64_t ld, float *dst)
{
    bg_v8f r0, r1, r2, r3;
    BG_LOAD8(r0, src);
    BG_LOAD8(r1, src + ld);
    BG_LOAD8(r2, src + 2 * ld);
    BG_LOAD8(r3, src + 3 * ld);
    const bg_v8f t0 = BG__SHUF(r0, r1, 0, 8, 1, 9, 4, 12, 5, 13);
    const bg_v8f t1 = BG__SHUF(r0, r1, 2, 10, 3, 11, 6, 14, 7, 15);
    const bg_v8f t2 = BG__SHUF(r2, r3, 0, 8, 1, 9, 4, 12, 5, 13);
    const bg_v8f t3 = BG__SHUF(r2, r3, 2, 10, 3, 11, 6, 14, 7, 15);
    const bg_v8f u0 = BG__SHUF(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13);   /* k = 0 | 4 */
    const bg_v8f u1 = BG__SHUF(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15); /* k = 1 | 5 */
    const bg_v8f u2 = BG__SHUF(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13);   /* k = 2 | 6 */
    const bg_v8f u3 = BG__SHUF(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15); /* k = 3 | 7 */
    const bg_v8f c0 = BG__SHUF(u0, u1, 0, 1, 2, 3, 8, 9, 10, 11);
    const bg_v8f c1 = BG__SHUF(u2, u3, 0, 1, 2, 3, 8, 9, 10, 11);
    const bg_v8f c2 = BG__SHUF(u0, u1, 4, 5, 6, 7, 12, 13, 14, 15);
    const bg_v8f c3 = BG__SHUF(u2, u3, 4, 5, 6, 7, 12, 13, 14, 15);
    BG_STORE8(dst, c0);
    BG_STORE8(dst + 8, c1);
    BG_STORE8(dst + 16, c2);
    BG_STORE8(dst + 24, c3);
}
#endif

/* Pack rows [i0, i0+mc) x columns [k0, k0+kc) of op(A) as MR-tall micro-panels (panel p at
 * dst + p*kc*MR, column k at +k*MR), zero-padding the last panel. */
static inline void bg__pack_a(int trans_a, const float *A, int64_t lda, int64_t i0, int64_t mc,
                              int64_t k0, int64_t kc, float *dst)
{
    const int64_t MR = BG_GEMM_MR;
    for (int64_t ip = 0; ip < mc; ip += MR, dst += kc * MR) {
        const int64_t mr = mc - ip < MR ? mc - ip : MR;
        if (trans_a && mr == MR) { /* A stored [K, M]: each k is MR contiguous floats */
            const float *src = A + k0 * lda + i0 + ip;
            for (int64_t k = 0; k < kc; ++k)
                memcpy(dst + k * MR, src + k * lda, BG_GEMM_MR * sizeof(float));
            continue;
        }
        int64_t k_done = 0;
#ifdef BG_HAVE_SHUFFLEVECTOR
        if (!trans_a && mr == MR) {
            k_done = kc / 8 * 8;
            const float *src = A + (i0 + ip) * lda + k0;
            for (int64_t k = 0; k < k_done; k += 8)
#if BG_GEMM_MR == 8
                bg__transpose8x8(src + k, lda, dst + k * MR, MR);
#else
                bg__transpose4x8(src + k, lda, dst + k * MR);
#endif
        }
#endif
        for (int64_t i = 0; i < MR; ++i) {
            if (i >= mr) {
                for (int64_t k = k_done; k < kc; ++k) dst[k * MR + i] = 0.0f;
            } else if (!trans_a) {
                const float *src = A + (i0 + ip + i) * lda + k0;
                for (int64_t k = k_done; k < kc; ++k) dst[k * MR + i] = src[k];
            } else {
                const float *src = A + k0 * lda + i0 + ip + i;
                for (int64_t k = k_done; k < kc; ++k) dst[k * MR + i] = src[k * lda];
            }
        }
    }
}
