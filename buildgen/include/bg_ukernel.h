/* bg_ukernel.h — the GEMM micro-kernel (part of bg_kernels.h, through bg_gemm.h).
 *
 * One MR x NR tile of C from a packed A micro-panel (MR floats per k) and NR floats of B per
 * k, accumulated in registers over a K slice, then scaled, merged with beta * C and given the
 * tile's epilogue as it is stored. Its shape follows the registers the level has:
 * - AVX-512 (x86-64-v4): 8 x 32, sixteen 16-lane accumulators;
 * - AVX2 or 256-bit SVE: 4 x 24, twelve 8-lane accumulators;
 * - 128-bit registers (NEON, SSE): the 4 x 24 tile from 4-wide accumulators, in passes.
 * The packing (bg_pack.h) and the blocked driver (bg_gemm.h) read the shape from
 * BG_GEMM_MR / BG_GEMM_NR, so they are one for every level.
 */
#ifndef BG_GEMM_H
#error "include bg_kernels.h, not bg_ukernel.h"
#endif

/* Software prefetch for a B that streams from memory (weights packed ahead of time, larger
 * than the caches): while a tile sweeps k, line k of the next micro-panel's share (pf, 64-byte
 * lines, pf_lines of them) is fetched into L2. The hardware prefetcher alone leaves the
 * first row block of each panel waiting on memory, then computes the rest from L1: the two
 * add up instead of overlapping. pf is NULL everywhere else (a constant: the test folds). */
#define BG__PREFETCH_STEP(pf, pf_lines, k)                                                         \
    do {                                                                                           \
        if ((pf) != NULL && (k) < (pf_lines)) __builtin_prefetch((pf) + 64 * (k), 0, 2);           \
    } while (0)

/* The epilogue of one whole MR x NR tile, applied in registers as the micro-kernel stores
 * it (a pass over the tile afterwards costs more than the pass it saves): the scale and
 * bias of each row (bias_axis 1) or of each column (bias_axis 0, from the tile's first). */
typedef struct bg__tile_ep {
    const bg_epilogue *ep;
    float row_scale[BG_GEMM_MR], row_bias[BG_GEMM_MR];
    const float *col_scale, *col_bias;
    int rows_only; /* no per-column scale, and relu, clip, hardswish or no activation */
} bg__tile_ep;

static inline void bg__tile_ep_init(bg__tile_ep *te, const bg_epilogue *ep, int64_t i0,
                                    int64_t j0)
{
    te->ep = ep;
    for (int i = 0; i < BG_GEMM_MR; ++i) {
        const bg__row_affine r = bg__affine_of_row(ep, i0 + i, j0);
        te->row_scale[i] = r.scale_scalar;
        te->row_bias[i] = r.bias_scalar;
        te->col_scale = r.scale_vec;
        te->col_bias = r.bias_vec;
    }
    te->rows_only = !te->col_scale &&
                    (ep->act == BG_ACT_NONE || ep->act == BG_ACT_RELU || ep->act == BG_ACT_CLIP ||
                     ep->act == BG_ACT_HARDSWISH);
}

/* bg__tile_ep8 for a rows_only epilogue (a convolution's bias and batch norm, a Linear
 * layer's bias, then ReLU or ReLU6), inline in the micro-kernel's store: the same operations
 * in the same order, where a call per vector that re-dispatched on the epilogue's kind cost
 * up to a sixth of a tile with a short K (a third for a column bias at K = 80). */
__attribute__((always_inline)) static inline void bg__tile_ep8_rows(bg_v8f *v,
                                                                    const bg__tile_ep *te,
                                                                    int row, int col)
{
    if (te->ep->scale) *v *= BG_SPLAT8(te->row_scale[row]);
    *v += BG_SPLAT8(te->row_bias[row]);
    if (te->col_bias) {
        bg_v8f t;
        BG_LOAD8(t, te->col_bias + col);
        *v += t;
    }
    const bg_v8f zero = BG_SPLAT8(0.0f);
    if (te->ep->act == BG_ACT_RELU) {
        *v = BG_BLEND8(*v > zero, *v, zero);
    } else if (te->ep->act == BG_ACT_CLIP) {
        const bg_v8f lo = BG_SPLAT8(te->ep->act_alpha), hi = BG_SPLAT8(te->ep->act_beta);
        *v = BG_BLEND8(*v < lo, lo, *v);
        *v = BG_BLEND8(*v > hi, hi, *v);
    } else if (te->ep->act == BG_ACT_HARDSWISH) {
        BG__HARDSWISH(*v, bg_v8f, BG_SPLAT8, BG_BLEND8);
    }
}

/* bg__epilogue_row's vector step on v, lanes [col, col + 8) of tile row `row`. */
static inline void bg__tile_ep8(bg_v8f *v, const bg__tile_ep *te, int row, int col)
{
    bg_v8f t;
    if (te->col_scale) {
        BG_LOAD8(t, te->col_scale + col);
        *v *= t;
    } else if (te->ep->scale) {
        *v *= BG_SPLAT8(te->row_scale[row]);
    }
    *v += BG_SPLAT8(te->row_bias[row]);
    if (te->col_bias) {
        BG_LOAD8(t, te->col_bias + col);
        *v += t;
    }
    bg__act8(v, te->ep);
}

#if BG_GEMM_VW == 16
/* ---- AVX-512 (x86-64-v4): the 8 x 32 tile in sixteen 16-lane accumulators ----
 * A k step is 2 B loads, 8 broadcasts and 16 FMAs: 256 multiply-adds in 8 cycles where the
 * CPU runs two 512-bit FMAs a cycle (Intel Xeon), twice the 4 x 24 tile's 96 in 6. Sixteen
 * independent accumulators cover the FMA latency (4 cycles x 2 ports) twice over, and with
 * the two B vectors and a broadcast they use 19 of the 32 registers. */
typedef float bg__v16f __attribute__((vector_size(64)));
typedef int32_t bg__v16i __attribute__((vector_size(64)));
#define BG__LOAD16(dst, src) memcpy(&(dst), (src), sizeof(bg__v16f))
#define BG__STORE16(dst, src) memcpy((dst), &(src), sizeof(bg__v16f))
#define BG__SPLAT16(x) ((bg__v16f){(x), (x), (x), (x), (x), (x), (x), (x),                       \
                                   (x), (x), (x), (x), (x), (x), (x), (x)})
#define BG__FMA16(a, b, c) ((bg__v16f)__builtin_ia32_vfmaddps512_mask((a), (b), (c), -1, 4))
#define BG__BLEND16(mask, a, b)                                                                    \
    ((bg__v16f)(((bg__v16i)(a) & (mask)) | ((bg__v16i)(b) & ~(mask))))

/* The tile epilogue on lanes [col, col + 16) of tile row `row`: a rows_only one (bias and
 * batch norm or a column bias, then ReLU or ReLU6) in 16 lanes, anything else through the
 * 8-lane step on each half (its activations are 8-lane: bg__act8). */
__attribute__((always_inline)) static inline void bg__tile_ep16(bg__v16f *v, const bg__tile_ep *te,
                                                                int row, int col)
{
    if (!te->rows_only) {
        bg_v8f lo, hi;
        memcpy(&lo, v, sizeof lo);
        memcpy(&hi, (const char *)v + sizeof lo, sizeof hi);
        bg__tile_ep8(&lo, te, row, col);
        bg__tile_ep8(&hi, te, row, col + 8);
        memcpy(v, &lo, sizeof lo);
        memcpy((char *)v + sizeof lo, &hi, sizeof hi);
        return;
    }
    if (te->ep->scale) *v *= BG__SPLAT16(te->row_scale[row]);
    *v += BG__SPLAT16(te->row_bias[row]);
    if (te->col_bias) {
        bg__v16f t;
        BG__LOAD16(t, te->col_bias + col);
        *v += t;
    }
    const bg__v16f zero = BG__SPLAT16(0.0f);
    if (te->ep->act == BG_ACT_RELU) {
        *v = BG__BLEND16(*v > zero, *v, zero);
    } else if (te->ep->act == BG_ACT_CLIP) {
        const bg__v16f lo = BG__SPLAT16(te->ep->act_alpha), hi = BG__SPLAT16(te->ep->act_beta);
        *v = BG__BLEND16(*v < lo, lo, *v);
        *v = BG__BLEND16(*v > hi, hi, *v);
    } else if (te->ep->act == BG_ACT_HARDSWISH) {
        BG__HARDSWISH(*v, bg__v16f, BG__SPLAT16, BG__BLEND16);
    }
}

/* One output row, nv 16-lane vectors wide: bg__UK_STORE_ROW's contract. */
#define BG__UK16_STORE_ROW(crow, row, r0, r1)                                                      \
    do {                                                                                           \
        bg__v16f o0 = (r0) * va, o1 = (r1) * va, p_;                                               \
        if (beta != 0.0f) {                                                                        \
            BG__LOAD16(p_, (crow));                                                                \
            o0 = BG__FMA16(p_, vb, o0);                                                            \
            if (nv > 1) {                                                                          \
                BG__LOAD16(p_, (crow) + 16);                                                       \
                o1 = BG__FMA16(p_, vb, o1);                                                        \
            }                                                                                      \
        }                                                                                          \
        if (te != NULL) {                                                                          \
            bg__tile_ep16(&o0, te, (row), 0);                                                      \
            if (nv > 1) bg__tile_ep16(&o1, te, (row), 16);                                         \
        }                                                                                          \
        BG__STORE16((crow), o0);                                                                   \
        if (nv > 1) BG__STORE16((crow) + 16, o1);                                                  \
    } while (0)

/* One broadcast of a[ai] serves both FMAs of the row. */
#define BG__UK16_ROW(ai, r0, r1)                                                                   \
    do {                                                                                           \
        const bg__v16f s_ = BG__SPLAT16(a[ai]);                                                    \
        r0 = BG__FMA16(s_, b0, r0);                                                                \
        if (nv > 1) r1 = BG__FMA16(s_, b1, r1);                                                    \
    } while (0)

/* The 8 x 32 micro-kernel, or 8 x 16 (nv = 1) for a ragged last column panel; otherwise the
 * 8-lane kernel's contract (below). */
__attribute__((always_inline)) static inline void
bg__ukernel_body(int64_t kc, const float *restrict a, const float *restrict b, int64_t bs,
                 const int64_t *restrict rows, const int64_t *restrict vo, float *restrict c,
                 int64_t ldc, float alpha, float beta, int nv, const bg__tile_ep *te,
                 const char *pf, int64_t pf_lines)
{
    const bg__v16f zero = BG__SPLAT16(0.0f);
    bg__v16f c00 = zero, c01 = zero, c10 = zero, c11 = zero, c20 = zero, c21 = zero;
    bg__v16f c30 = zero, c31 = zero, c40 = zero, c41 = zero, c50 = zero, c51 = zero;
    bg__v16f c60 = zero, c61 = zero, c70 = zero, c71 = zero;
    const int64_t off1 = vo && nv > 1 ? vo[1] - vo[0] : 16;
    for (int64_t k = 0; k < kc; ++k, a += BG_GEMM_MR, b += bs) {
        BG__PREFETCH_STEP(pf, pf_lines, k);
        const float *bk = rows ? b + rows[k] : b;
        bg__v16f b0, b1 = zero;
        BG__LOAD16(b0, bk);
        if (nv > 1) BG__LOAD16(b1, bk + off1);
        BG__UK16_ROW(0, c00, c01);
        BG__UK16_ROW(1, c10, c11);
        BG__UK16_ROW(2, c20, c21);
        BG__UK16_ROW(3, c30, c31);
        BG__UK16_ROW(4, c40, c41);
        BG__UK16_ROW(5, c50, c51);
        BG__UK16_ROW(6, c60, c61);
        BG__UK16_ROW(7, c70, c71);
    }
    const bg__v16f va = BG__SPLAT16(alpha), vb = BG__SPLAT16(beta);
    BG__UK16_STORE_ROW(c, 0, c00, c01);
    BG__UK16_STORE_ROW(c + ldc, 1, c10, c11);
    BG__UK16_STORE_ROW(c + 2 * ldc, 2, c20, c21);
    BG__UK16_STORE_ROW(c + 3 * ldc, 3, c30, c31);
    BG__UK16_STORE_ROW(c + 4 * ldc, 4, c40, c41);
    BG__UK16_STORE_ROW(c + 5 * ldc, 5, c50, c51);
    BG__UK16_STORE_ROW(c + 6 * ldc, 6, c60, c61);
    BG__UK16_STORE_ROW(c + 7 * ldc, 7, c70, c71);
}
#else
/* One output row of the micro-kernel, nv vectors wide: C[row] = alpha*acc (+ beta*C[row]
 * unless beta == 0, in which case C is never read: it may hold NaN), then the tile's
 * epilogue when te is not NULL (whole tiles of the last K slice only). */
#define BG__UK_STORE_ROW(crow, row, r0, r1, r2)                                                     \
    do {                                                                                           \
        bg_v8f o0 = (r0) * va, o1 = (r1) * va, o2 = (r2) * va, p_;                                 \
        if (beta != 0.0f) {                                                                        \
            BG_LOAD8(p_, (crow));                                                                  \
            o0 = BG_FMA8(p_, vb, o0);                                                              \
            if (nv > 1) {                                                                          \
                BG_LOAD8(p_, (crow) + 8);                                                          \
                o1 = BG_FMA8(p_, vb, o1);                                                          \
            }                                                                                      \
            if (nv > 2) {                                                                          \
                BG_LOAD8(p_, (crow) + 16);                                                         \
                o2 = BG_FMA8(p_, vb, o2);                                                          \
            }                                                                                      \
        }                                                                                          \
        if (te != NULL && te->rows_only) {                                                         \
            bg__tile_ep8_rows(&o0, te, (row), 0);                                                  \
            if (nv > 1) bg__tile_ep8_rows(&o1, te, (row), 8);                                      \
            if (nv > 2) bg__tile_ep8_rows(&o2, te, (row), 16);                                     \
        } else if (te != NULL) {                                                                   \
            bg__tile_ep8(&o0, te, (row), 0);                                                       \
            if (nv > 1) bg__tile_ep8(&o1, te, (row), 8);                                           \
            if (nv > 2) bg__tile_ep8(&o2, te, (row), 16);                                          \
        }                                                                                          \
        BG_STORE8((crow), o0);                                                                     \
        if (nv > 1) BG_STORE8((crow) + 8, o1);                                                     \
        if (nv > 2) BG_STORE8((crow) + 16, o2);                                                    \
    } while (0)

#if BG_NATIVE_V8
/* ---- 256-bit registers (AVX2, 256-bit SVE): the 4 x 24 tile, twelve 8-lane accumulators ---- */
#define BG__UK_ROW(ai, r0, r1, r2)                                                                 \
    do {                                                                                           \
        const bg_v8f av = BG_SPLAT8(a[ai]);                                                        \
        r0 = BG_FMA8(av, b0, r0);                                                                  \
        if (nv > 1) r1 = BG_FMA8(av, b1, r1);                                                      \
        if (nv > 2) r2 = BG_FMA8(av, b2, r2);                                                      \
    } while (0)

/* The 4 x 24 micro-kernel, or 4 x 8*nv for the ragged last column panel (nv = 1, 2, 3 is a
 * constant at every call site, so each width compiles to its own loop). a is a packed A
 * micro-panel (MR floats per k); b holds NR floats per k at stride bs (NR when packed, ldb
 * when B is read in place), of which the first VW*nv are used; or, when rows is not NULL
 * (a constant NULL everywhere but the row-table kernel), row k at b + rows[k]. Its VW-wide
 * vectors lie side by side, or, when vo is not NULL (the row-table kernel too), vector v
 * at vo[v] - vo[0] past the first. */
__attribute__((always_inline)) static inline void
bg__ukernel_body(int64_t kc, const float *restrict a, const float *restrict b, int64_t bs,
                 const int64_t *restrict rows, const int64_t *restrict vo, float *restrict c,
                 int64_t ldc, float alpha, float beta, int nv, const bg__tile_ep *te,
                 const char *pf, int64_t pf_lines)
{
    bg_v8f c00 = BG_SPLAT8(0.0f), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
    bg_v8f c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
    const int64_t off1 = vo && nv > 1 ? vo[1] - vo[0] : 8;
    const int64_t off2 = vo && nv > 2 ? vo[2] - vo[0] : 16;
    for (int64_t k = 0; k < kc; ++k, a += BG_GEMM_MR, b += bs) {
        BG__PREFETCH_STEP(pf, pf_lines, k);
        const float *bk = rows ? b + rows[k] : b;
        bg_v8f b0, b1 = c00, b2 = c00;
        BG_LOAD8(b0, bk);
        if (nv > 1) BG_LOAD8(b1, bk + off1);
        if (nv > 2) BG_LOAD8(b2, bk + off2);
        BG__UK_ROW(0, c00, c01, c02);
        BG__UK_ROW(1, c10, c11, c12);
        BG__UK_ROW(2, c20, c21, c22);
        BG__UK_ROW(3, c30, c31, c32);
    }
    const bg_v8f va = BG_SPLAT8(alpha), vb = BG_SPLAT8(beta);
    BG__UK_STORE_ROW(c, 0, c00, c01, c02);
    BG__UK_STORE_ROW(c + ldc, 1, c10, c11, c12);
    BG__UK_STORE_ROW(c + 2 * ldc, 2, c20, c21, c22);
    BG__UK_STORE_ROW(c + 3 * ldc, 3, c30, c31, c32);
}
#else /* 128-bit registers: the same tiles, from 4-wide accumulators */

/* Columns of 8 one pass of the 128-bit kernel covers: NEON's 32 registers hold the whole
 * 4 x 24 tile (24 accumulators, 6 B vectors, the 4 A values); SSE's 16 hold a 4 x 8 strip
 * (8 + 2 + 1), so a tile takes three passes over the same packed panels, which stay in L1. */
#if defined(__aarch64__)
#define BG__UK4_GROUPS 3
/* Keep the four A values in one register: left alone, GCC loads them through integer
 * registers (ldp x, lsr, fmov: 8 instructions for one ldr q) and spills 3 accumulators. */
#define BG__UK4_PIN(v) __asm__("" : "+w"(v))
#else
#define BG__UK4_GROUPS 1
#define BG__UK4_PIN(v) ((void)0)
#endif

/* Two 4-wide accumulators as one 8-wide vector (the store and epilogue are 8-wide: once per
 * tile, after the k loop, so their stack traffic is not in the loop). */
#define BG__UK4_JOIN(v, lo, hi)                                                                    \
    do {                                                                                           \
        memcpy(&(v), &(lo), sizeof(bg_v4f));                                                       \
        memcpy((char *)&(v) + sizeof(bg_v4f), &(hi), sizeof(bg_v4f));                             \
    } while (0)

#define BG__UK4_ROW(i, r0, r1, r2, r3, r4, r5)                                                     \
    do {                                                                                           \
        const bg_v4f ai = BG_LANE4(av, i);                                                         \
        r0 = BG_FMA4(b0, ai, r0);                                                                  \
        r1 = BG_FMA4(b1, ai, r1);                                                                  \
        if (groups > 1) {                                                                          \
            r2 = BG_FMA4(b2, ai, r2);                                                              \
            r3 = BG_FMA4(b3, ai, r3);                                                              \
        }                                                                                          \
        if (groups > 2) {                                                                          \
            r4 = BG_FMA4(b4, ai, r4);                                                              \
            r5 = BG_FMA4(b5, ai, r5);                                                              \
        }                                                                                          \
    } while (0)

#define BG__UK4_STORE_ROW(crow, row, r0, r1, r2, r3, r4, r5)                                       \
    do {                                                                                           \
        bg_v8f w0, w1 = va, w2 = va;                                                               \
        BG__UK4_JOIN(w0, r0, r1);                                                                  \
        if (groups > 1) BG__UK4_JOIN(w1, r2, r3);                                                  \
        if (groups > 2) BG__UK4_JOIN(w2, r4, r5);                                                  \
        const int nv = groups;                                                                     \
        BG__UK_STORE_ROW(crow, row, w0, w1, w2);                                                   \
    } while (0)

/* One pass: rows 0..3 x columns [8*g0, 8*(g0 + groups)) of the tile (groups <= GROUPS, a
 * constant). The tile epilogue takes columns relative to the tile, hence the shifted te. */
__attribute__((always_inline)) static inline void
bg__ukernel_pass(int64_t kc, const float *restrict a, const float *restrict b, int64_t bs,
                 const int64_t *restrict rows, const int64_t *restrict vo, float *restrict c,
                 int64_t ldc, float alpha, float beta, int groups, const bg__tile_ep *te,
                 const char *pf, int64_t pf_lines)
{
    bg_v4f c00 = BG_SPLAT4(0.0f), c01 = c00, c02 = c00, c03 = c00, c04 = c00, c05 = c00;
    bg_v4f c10 = c00, c11 = c00, c12 = c00, c13 = c00, c14 = c00, c15 = c00;
    bg_v4f c20 = c00, c21 = c00, c22 = c00, c23 = c00, c24 = c00, c25 = c00;
    bg_v4f c30 = c00, c31 = c00, c32 = c00, c33 = c00, c34 = c00, c35 = c00;
    const int64_t off1 = vo && groups > 1 ? vo[1] - vo[0] : 8;
    const int64_t off2 = vo && groups > 2 ? vo[2] - vo[0] : 16;
    for (int64_t k = 0; k < kc; ++k, a += BG_GEMM_MR, b += bs) {
        BG__PREFETCH_STEP(pf, pf_lines, k);
        const float *bk = rows ? b + rows[k] : b;
        bg_v4f av, b0, b1, b2 = c00, b3 = c00, b4 = c00, b5 = c00;
        BG_LOAD4(av, a);
        BG__UK4_PIN(av);
        BG_LOAD4(b0, bk);
        BG_LOAD4(b1, bk + 4);
        if (groups > 1) {
            BG_LOAD4(b2, bk + off1);
            BG_LOAD4(b3, bk + off1 + 4);
        }
        if (groups > 2) {
            BG_LOAD4(b4, bk + off2);
            BG_LOAD4(b5, bk + off2 + 4);
        }
        BG__UK4_ROW(0, c00, c01, c02, c03, c04, c05);
        BG__UK4_ROW(1, c10, c11, c12, c13, c14, c15);
        BG__UK4_ROW(2, c20, c21, c22, c23, c24, c25);
        BG__UK4_ROW(3, c30, c31, c32, c33, c34, c35);
    }
    const bg_v8f va = BG_SPLAT8(alpha), vb = BG_SPLAT8(beta);
    BG__UK4_STORE_ROW(c, 0, c00, c01, c02, c03, c04, c05);
    BG__UK4_STORE_ROW(c + ldc, 1, c10, c11, c12, c13, c14, c15);
    BG__UK4_STORE_ROW(c + 2 * ldc, 2, c20, c21, c22, c23, c24, c25);
    BG__UK4_STORE_ROW(c + 3 * ldc, 3, c30, c31, c32, c33, c34, c35);
}

/* bg__ukernel_body's contract (below) in passes of GROUPS columns of 8. */
__attribute__((always_inline)) static inline void
bg__ukernel_body(int64_t kc, const float *restrict a, const float *restrict b, int64_t bs,
                 const int64_t *restrict rows, const int64_t *restrict vo, float *restrict c,
                 int64_t ldc, float alpha, float beta, int nv, const bg__tile_ep *te,
                 const char *pf, int64_t pf_lines)
{
    for (int g0 = 0; g0 < nv; g0 += BG__UK4_GROUPS) {
        const int groups = nv - g0 < BG__UK4_GROUPS ? nv - g0 : BG__UK4_GROUPS;
        bg__tile_ep shifted;
        if (te != NULL) {
            shifted = *te;
            if (shifted.col_scale) shifted.col_scale += 8 * g0;
            if (shifted.col_bias) shifted.col_bias += 8 * g0;
        }
        bg__ukernel_pass(kc, a, b + (vo ? vo[g0] - vo[0] : 8 * g0), bs, rows,
                         vo ? vo + g0 : NULL, c + 8 * g0, ldc, alpha, beta, groups,
                         te != NULL ? &shifted : NULL, g0 == 0 ? pf : NULL, pf_lines);
    }
}
#endif
#endif

/* One function per width, never inlined: register allocation inside the driver's large
 * body would otherwise keep scalars in vector registers and spill the B vectors back to
 * memory operands (measured: a third slower). */
__attribute__((noinline)) static void bg__ukernel_full(int64_t kc, const float *a, const float *b,
                                                       int64_t bs, float *c, int64_t ldc,
                                                       float alpha, float beta,
                                                       const bg__tile_ep *te)
{
    bg__ukernel_body(kc, a, b, bs, NULL, NULL, c, ldc, alpha, beta, BG_GEMM_NV, te, NULL, 0);
}
/* The whole tile, prefetching pf_lines lines from pf as it goes (BG__PREFETCH_STEP): a
 * function of its own, so that the test stays out of every other tile's loop. */
__attribute__((noinline)) static void bg__ukernel_full_pf(int64_t kc, const float *a,
                                                          const float *b, float *c, int64_t ldc,
                                                          float alpha, float beta,
                                                          const bg__tile_ep *te, const char *pf,
                                                          int64_t pf_lines)
{
    bg__ukernel_body(kc, a, b, BG_GEMM_NR, NULL, NULL, c, ldc, alpha, beta, BG_GEMM_NV, te, pf,
                     pf_lines);
}
#if BG_GEMM_NV > 2
__attribute__((noinline)) static void bg__ukernel_w2(int64_t kc, const float *a, const float *b,
                                                     int64_t bs, float *c, int64_t ldc,
                                                     float alpha, float beta)
{
    bg__ukernel_body(kc, a, b, bs, NULL, NULL, c, ldc, alpha, beta, 2, NULL, NULL, 0);
}
#endif
__attribute__((noinline)) static void bg__ukernel_w1(int64_t kc, const float *a, const float *b,
                                                     int64_t bs, float *c, int64_t ldc,
                                                     float alpha, float beta)
{
    bg__ukernel_body(kc, a, b, bs, NULL, NULL, c, ldc, alpha, beta, 1, NULL, NULL, 0);
}

/* The whole tile with row k of B at b + rows[k], its VW-wide column vectors v at
 * vo[v] - vo[0] past that (bg__bsrc.rows, bg__bsrc.row_width). */
__attribute__((noinline)) static void bg__ukernel_rows_full(int64_t kc, const float *a,
                                                            const float *b, const int64_t *rows,
                                                            const int64_t *vo, float *c,
                                                            int64_t ldc, float alpha, float beta,
                                                            const bg__tile_ep *te)
{
    bg__ukernel_body(kc, a, b, 0, rows, vo, c, ldc, alpha, beta, BG_GEMM_NV, te, NULL, 0);
}

/* The tile's first VW * nv columns (nv = 1 .. NV). */
static inline void bg__ukernel(int64_t kc, const float *a, const float *b, int64_t bs, float *c,
                               int64_t ldc, float alpha, float beta, int nv)
{
    if (nv == BG_GEMM_NV)
        bg__ukernel_full(kc, a, b, bs, c, ldc, alpha, beta, NULL);
#if BG_GEMM_NV > 2
    else if (nv == 2)
        bg__ukernel_w2(kc, a, b, bs, c, ldc, alpha, beta);
#endif
    else
        bg__ukernel_w1(kc, a, b, bs, c, ldc, alpha, beta);
}

/* ---- One row of a tile: a GEMM of one row (a Linear layer at batch 1), a convolution of one
 * output pixel (transposed form), the last row of M = 8q + 1 ----
 * The tile kernel would compute all MR rows for it: MR broadcasts and MR x NV FMAs a k step
 * for one row's NV, so its B loads, the one stream that matters when B is a layer's weights
 * read once per run, come too far apart for the CPU to keep enough of them in flight. Alone,
 * a k step is a broadcast, NV loads and NV FMAs, and a prefetch runs BG__ROW_AHEAD steps
 * ahead: a 512 x 1280 layer on a 1 x 1 map (PP-LCNet's last) from cold weights took 320-355
 * us as a tile's row, 210-225 us so (a plain read of its 2.6 MB: 220 us); 100-135 -> 52-88
 * us warm (x86-64-v4, -O3, alternated). Each output is the tile row's: the same FMAs (lane
 * by lane, so at any vector width) in the same order, scaled by alpha alike. */
#if BG_GEMM_VW == 16
typedef bg__v16f bg__rowv;
#define BG__ROW_VW 16
#define BG__ROW_LOAD BG__LOAD16
#define BG__ROW_STORE BG__STORE16
#define BG__ROW_SPLAT BG__SPLAT16
#define BG__ROW_FMA BG__FMA16
#else
typedef bg_vnf bg__rowv;
#define BG__ROW_VW BG_VN
#define BG__ROW_LOAD BG_LOADN
#define BG__ROW_STORE BG_STOREN
#define BG__ROW_SPLAT BG_SPLATN
#define BG__ROW_FMA BG_FMAN
#endif
#define BG__ROW_NV (BG_GEMM_NR / BG__ROW_VW)
#define BG__ROW_AHEAD 8 /* k steps: 1 KiB of a packed 16-lane panel */

/* row[0:NR) = alpha * (row 0 of a's panel) x (NR columns of b, at stride bs). */
__attribute__((noinline)) static void bg__ukernel_row(int64_t kc, const float *restrict a,
                                                      const float *restrict b, int64_t bs,
                                                      float *restrict row, float alpha)
{
    bg__rowv acc[BG__ROW_NV];
#pragma GCC unroll 8
    for (int v = 0; v < BG__ROW_NV; ++v) acc[v] = BG__ROW_SPLAT(0.0f);
    for (int64_t k = 0; k < kc; ++k, a += BG_GEMM_MR, b += bs) {
        __builtin_prefetch(b + BG__ROW_AHEAD * bs);
        __builtin_prefetch(b + BG__ROW_AHEAD * bs + BG_GEMM_NR - 1);
        const bg__rowv s = BG__ROW_SPLAT(a[0]);
#pragma GCC unroll 8
        for (int v = 0; v < BG__ROW_NV; ++v) {
            bg__rowv bv;
            BG__ROW_LOAD(bv, b + v * BG__ROW_VW);
            acc[v] = BG__ROW_FMA(s, bv, acc[v]);
        }
    }
    const bg__rowv va = BG__ROW_SPLAT(alpha);
#pragma GCC unroll 8
    for (int v = 0; v < BG__ROW_NV; ++v) {
        const bg__rowv out = acc[v] * va;
        BG__ROW_STORE(row + v * BG__ROW_VW, out);
    }
}

/* C[0:mr, 0:nr] = tile (+ beta * C unless beta == 0): a ragged tile computed whole. */
static inline void bg__merge_tile(const float *tile, float *c, int64_t ldc, int64_t mr,
                                  int64_t nr, float beta)
{
    for (int64_t i = 0; i < mr; ++i)
        for (int64_t j = 0; j < nr; ++j) {
            float v = tile[i * BG_GEMM_NR + j];
            if (beta != 0.0f) v = BG_FMA1(c[i * ldc + j], beta, v);
            c[i * ldc + j] = v;
        }
}

/* An edge tile (mr < MR or nr < NR): the narrowest kernel that covers nr columns, into a
 * scratch tile when the tile is ragged, then merged into C. */
static inline void bg__ukernel_edge(int64_t kc, const float *a, const float *b, int64_t bs,
                                    float *c, int64_t ldc, int64_t mr, int64_t nr, float alpha,
                                    float beta)
{
    const int nv = (int)((nr + BG_GEMM_VW - 1) / BG_GEMM_VW);
    if (mr == BG_GEMM_MR && nr == BG_GEMM_VW * nv) { /* whole vectors: straight into C */
        bg__ukernel(kc, a, b, bs, c, ldc, alpha, beta, nv);
        return;
    }
    float tile[BG_GEMM_MR * BG_GEMM_NR];
    if (mr == 1) /* every NR columns: B's panels are padded to NR, or read in place whole */
        bg__ukernel_row(kc, a, b, bs, tile, alpha);
    else
        bg__ukernel(kc, a, b, bs, tile, BG_GEMM_NR, alpha, 0.0f, nv);
    bg__merge_tile(tile, c, ldc, mr, nr, beta);
}
