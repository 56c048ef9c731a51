/* bg_gemm.h — single-precision GEMM (part of bg_kernels.h; include that instead).
 *
 * BLIS/GotoBLAS structure: for each NC-wide column block of op(B) and KC-deep slice of K,
 * op(B) is packed into KC x NR micro-panels (each stays in L1 while the micro-kernel sweeps
 * down the rows); for each MC-tall row block, op(A) is packed into MR x KC micro-panels (the
 * block stays in L2). Packing resolves transposes and zero-pads the M/N edges, so the
 * micro-kernel only ever sees whole MR x NR tiles. The epilogue (alpha, beta, bias,
 * activation) is applied as a tile is written, bias/activation after the last K slice.
 *
 * Adjustments to the textbook scheme, each measured on the shapes this library serves:
 * - K and N are cut into equal slices (K = 288 is 144 + 144, not 256 + 32).
 * - With one row block (M <= MC) the B block is used once, right after packing: it is
 *   capped to stay in L2 instead of filling NC columns (which would spill to L3).
 * - With M <= 16 and B not transposed, B is read in place (packing would cost more than
 *   the few rows gain); M == 1 or N == 1 goes to the matrix-vector loops (bg_gemv.h).
 * - A constant B (weights) can be packed once ahead of time (bg_sgemm_pack_b), and so can a
 *   constant A (a convolution's filters: bg_sgemm_pack_a); the generated create does it.
 *
 * MR x NR = 4 x 24: twelve 8-lane accumulators plus three B vectors and one broadcast A fill
 * fifteen of AVX2's sixteen registers. 4 divides the row counts that matter here (batch
 * sizes 8..64 and channel counts 32..128) where 6 (the other common AVX2 shape) does not.
 * Without 256-bit registers (NEON, SSE) the same tile is computed from 4-wide accumulators (below), so the
 * packing and the driver are one for every target. With AVX-512 (x86-64-v4) each row of the
 * tile is one 16-lane and one 8-lane accumulator: 8 FMAs a k step instead of 12.
 */
#ifndef BG_KERNELS_H
#error "include bg_kernels.h, not bg_gemm.h"
#endif
#ifndef BG_GEMM_H
#define BG_GEMM_H

#define BG_GEMM_MR 4
#define BG_GEMM_NR 24
#define BG_GEMM_KC 256
#define BG_GEMM_MC 128
#define BG_GEMM_NC 3072
/* Budget (floats) of a packed B block when M <= MC: 192 KiB of a 512 KiB L2. */
#define BG_GEMM_SMALL_M_B_FLOATS (48 * 1024)
/* Up to this many rows, op(B) is read in place (when not transposed) instead of packed:
 * each B element is then used by so few rows that copying it costs more than it saves. */
#define BG_GEMM_DIRECT_B_MAX_M 16

#include "bg_pack.h"

/* The epilogue of one whole MR x NR tile, applied in registers as the micro-kernel stores
 * it (a pass over the tile afterwards costs more than the pass it saves): the scale and
 * bias of each row (bias_axis 1) or of each column (bias_axis 0, from the tile's first). */
typedef struct bg__tile_ep {
    const bg_epilogue *ep;
    float row_scale[BG_GEMM_MR], row_bias[BG_GEMM_MR];
    const float *col_scale, *col_bias;
    int rows_only; /* no per-column terms, and relu, clip or no activation */
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
    te->rows_only = !te->col_scale && !te->col_bias &&
                    (ep->act == BG_ACT_NONE || ep->act == BG_ACT_RELU || ep->act == BG_ACT_CLIP);
}

/* bg__tile_ep8 for a rows_only epilogue (a convolution's bias and batch norm, then ReLU or
 * ReLU6), inline in the micro-kernel's store: the same operations in the same order, where a
 * call per vector that re-dispatched on the epilogue's kind cost up to a sixth of a tile
 * with a short K. */
__attribute__((always_inline)) static inline void bg__tile_ep8_rows(bg_v8f *v,
                                                                    const bg__tile_ep *te,
                                                                    int row)
{
    if (te->ep->scale) *v *= BG_SPLAT8(te->row_scale[row]);
    *v += BG_SPLAT8(te->row_bias[row]);
    const bg_v8f zero = BG_SPLAT8(0.0f);
    if (te->ep->act == BG_ACT_RELU) {
        *v = BG_BLEND8(*v > zero, *v, zero);
    } else if (te->ep->act == BG_ACT_CLIP) {
        const bg_v8f lo = BG_SPLAT8(te->ep->act_alpha), hi = BG_SPLAT8(te->ep->act_beta);
        *v = BG_BLEND8(*v < lo, lo, *v);
        *v = BG_BLEND8(*v > hi, hi, *v);
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
            bg__tile_ep8_rows(&o0, te, (row));                                                     \
            if (nv > 1) bg__tile_ep8_rows(&o1, te, (row));                                         \
            if (nv > 2) bg__tile_ep8_rows(&o2, te, (row));                                         \
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
#define BG__UK_ROW(ai, r0, r1, r2)                                                                 \
    do {                                                                                           \
        const bg_v8f av = BG_SPLAT8(a[ai]);                                                        \
        r0 = BG_FMA8(av, b0, r0);                                                                  \
        if (nv > 1) r1 = BG_FMA8(av, b1, r1);                                                      \
        if (nv > 2) r2 = BG_FMA8(av, b2, r2);                                                      \
    } while (0)

/* The 4 x 24 micro-kernel, or 4 x 8*nv for the ragged last column panel (nv = 1, 2, 3 is a
 * constant at every call site, so each width compiles to its own loop). a is a packed A
 * micro-panel (4 floats per k); b holds 24 floats per k at stride bs (NR when packed, ldb
 * when B is read in place), of which the first 8*nv are used; or, when rows is not NULL
 * (a constant NULL everywhere but the row-table kernel), row k at b + rows[k]. */
#if defined(__AVX512F__) && defined(__x86_64__)
/* AVX-512 (x86-64-v4): columns 0..15 of a row in one 16-lane accumulator, 16..23 in an
 * 8-lane one. A 4 x 24 k step is then 4 + 4 FMAs, not 12: where the CPU runs 512-bit FMAs
 * at full rate (Intel Xeon: two per cycle) that is 4 cycles instead of 6; where it splits
 * them in two (AMD Zen 4) it is the same work. The packed layout, the stores and the
 * epilogue are the 8-lane kernel's (the wide accumulators are split after the k loop). */
typedef float bg__v16f __attribute__((vector_size(64), aligned(4)));
#define BG__SPLAT16(x) ((bg__v16f){(x), (x), (x), (x), (x), (x), (x), (x),                       \
                                   (x), (x), (x), (x), (x), (x), (x), (x)})
#define BG__FMA16(a, b, c) ((bg__v16f)__builtin_ia32_vfmaddps512_mask((a), (b), (c), -1, 4))
#define BG__SPLIT16(lo, hi, v)                                                                     \
    do {                                                                                           \
        memcpy(&(lo), &(v), sizeof(bg_v8f));                                                       \
        memcpy(&(hi), (const char *)&(v) + sizeof(bg_v8f), sizeof(bg_v8f));                       \
    } while (0)
/* One broadcast of a[ai] serves both FMAs (the 8-lane one takes its low half: the same
 * register), keeping the k step at 4 broadcasts and 2 B loads. */
#define BG__UK_ROW16(ai, w, r2)                                                                    \
    do {                                                                                           \
        const bg__v16f s_ = BG__SPLAT16(a[ai]);                                                    \
        w = BG__FMA16(s_, b01, w);                                                                 \
        if (nv > 2) {                                                                              \
            bg_v8f h_;                                                                             \
            memcpy(&h_, &s_, sizeof(h_));                                                          \
            r2 = BG_FMA8(h_, b2, r2);                                                              \
        }                                                                                          \
    } while (0)
#endif

__attribute__((always_inline)) static inline void
bg__ukernel_body(int64_t kc, const float *restrict a, const float *restrict b, int64_t bs,
                 const int64_t *restrict rows, float *restrict c, int64_t ldc, float alpha,
                 float beta, int nv, const bg__tile_ep *te)
{
    bg_v8f c00 = BG_SPLAT8(0.0f), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
    bg_v8f c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
#if defined(__AVX512F__) && defined(__x86_64__)
    if (nv > 1) {
        bg__v16f w0 = BG__SPLAT16(0.0f), w1 = w0, w2 = w0, w3 = w0;
        for (int64_t k = 0; k < kc; ++k, a += BG_GEMM_MR, b += bs) {
            const float *bk = rows ? b + rows[k] : b;
            bg__v16f b01;
            bg_v8f b2 = c00;
            memcpy(&b01, bk, sizeof(b01));
            if (nv > 2) BG_LOAD8(b2, bk + 16);
            BG__UK_ROW16(0, w0, c02);
            BG__UK_ROW16(1, w1, c12);
            BG__UK_ROW16(2, w2, c22);
            BG__UK_ROW16(3, w3, c32);
        }
        BG__SPLIT16(c00, c01, w0);
        BG__SPLIT16(c10, c11, w1);
        BG__SPLIT16(c20, c21, w2);
        BG__SPLIT16(c30, c31, w3);
        kc = 0; /* the k loop below has nothing left to do */
    }
#endif
    for (int64_t k = 0; k < kc; ++k, a += BG_GEMM_MR, b += bs) {
        const float *bk = rows ? b + rows[k] : b;
        bg_v8f b0, b1 = c00, b2 = c00;
        BG_LOAD8(b0, bk);
        if (nv > 1) BG_LOAD8(b1, bk + 8);
        if (nv > 2) BG_LOAD8(b2, bk + 16);
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
                 const int64_t *restrict rows, float *restrict c, int64_t ldc, float alpha,
                 float beta, int groups, const bg__tile_ep *te)
{
    bg_v4f c00 = BG_SPLAT4(0.0f), c01 = c00, c02 = c00, c03 = c00, c04 = c00, c05 = c00;
    bg_v4f c10 = c00, c11 = c00, c12 = c00, c13 = c00, c14 = c00, c15 = c00;
    bg_v4f c20 = c00, c21 = c00, c22 = c00, c23 = c00, c24 = c00, c25 = c00;
    bg_v4f c30 = c00, c31 = c00, c32 = c00, c33 = c00, c34 = c00, c35 = c00;
    for (int64_t k = 0; k < kc; ++k, a += BG_GEMM_MR, b += bs) {
        const float *bk = rows ? b + rows[k] : b;
        bg_v4f av, b0, b1, b2 = c00, b3 = c00, b4 = c00, b5 = c00;
        BG_LOAD4(av, a);
        BG__UK4_PIN(av);
        BG_LOAD4(b0, bk);
        BG_LOAD4(b1, bk + 4);
        if (groups > 1) {
            BG_LOAD4(b2, bk + 8);
            BG_LOAD4(b3, bk + 12);
        }
        if (groups > 2) {
            BG_LOAD4(b4, bk + 16);
            BG_LOAD4(b5, bk + 20);
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
                 const int64_t *restrict rows, float *restrict c, int64_t ldc, float alpha,
                 float beta, int nv, const bg__tile_ep *te)
{
    for (int g0 = 0; g0 < nv; g0 += BG__UK4_GROUPS) {
        const int groups = nv - g0 < BG__UK4_GROUPS ? nv - g0 : BG__UK4_GROUPS;
        bg__tile_ep shifted;
        if (te != NULL) {
            shifted = *te;
            if (shifted.col_scale) shifted.col_scale += 8 * g0;
            if (shifted.col_bias) shifted.col_bias += 8 * g0;
        }
        bg__ukernel_pass(kc, a, b + 8 * g0, bs, rows, c + 8 * g0, ldc, alpha, beta, groups,
                         te != NULL ? &shifted : NULL);
    }
}
#endif

/* One function per width, never inlined: register allocation inside the driver's large
 * body would otherwise keep scalars in vector registers and spill the B vectors back to
 * memory operands (measured: a third slower). */
__attribute__((noinline)) static void bg__ukernel_w24(int64_t kc, const float *a, const float *b,
                                                      int64_t bs, float *c, int64_t ldc,
                                                      float alpha, float beta,
                                                      const bg__tile_ep *te)
{
    bg__ukernel_body(kc, a, b, bs, NULL, c, ldc, alpha, beta, 3, te);
}
__attribute__((noinline)) static void bg__ukernel_w16(int64_t kc, const float *a, const float *b,
                                                      int64_t bs, float *c, int64_t ldc,
                                                      float alpha, float beta)
{
    bg__ukernel_body(kc, a, b, bs, NULL, c, ldc, alpha, beta, 2, NULL);
}
__attribute__((noinline)) static void bg__ukernel_w8(int64_t kc, const float *a, const float *b,
                                                     int64_t bs, float *c, int64_t ldc,
                                                     float alpha, float beta)
{
    bg__ukernel_body(kc, a, b, bs, NULL, c, ldc, alpha, beta, 1, NULL);
}

/* The 4 x 24 tile with row k of B at b + rows[k] (bg__bsrc.rows). */
__attribute__((noinline)) static void bg__ukernel_rows_w24(int64_t kc, const float *a,
                                                           const float *b, const int64_t *rows,
                                                           float *c, int64_t ldc, float alpha,
                                                           float beta, const bg__tile_ep *te)
{
    bg__ukernel_body(kc, a, b, 0, rows, c, ldc, alpha, beta, 3, te);
}

static inline void bg__ukernel(int64_t kc, const float *a, const float *b, int64_t bs, float *c,
                               int64_t ldc, float alpha, float beta, int nv)
{
    if (nv == 3)
        bg__ukernel_w24(kc, a, b, bs, c, ldc, alpha, beta, NULL);
    else if (nv == 2)
        bg__ukernel_w16(kc, a, b, bs, c, ldc, alpha, beta);
    else
        bg__ukernel_w8(kc, a, b, bs, c, ldc, alpha, beta);
}

/* C[0:mr, 0:nr] = tile (+ beta * C unless beta == 0): a ragged tile computed whole. */
static inline void bg__merge_tile(const float *tile, float *c, int64_t ldc, int64_t mr,
                                  int64_t nr, float beta)
{
    for (int64_t i = 0; i < mr; ++i)
        for (int64_t j = 0; j < nr; ++j) {
            float v = tile[i * BG_GEMM_NR + j];
            if (beta != 0.0f) v += beta * c[i * ldc + j];
            c[i * ldc + j] = v;
        }
}

/* An edge tile (mr < MR or nr < NR): the narrowest kernel that covers nr columns, into a
 * scratch tile when the tile is ragged, then merged into C. */
static inline void bg__ukernel_edge(int64_t kc, const float *a, const float *b, int64_t bs,
                                    float *c, int64_t ldc, int64_t mr, int64_t nr, float alpha,
                                    float beta)
{
    const int nv = (int)((nr + 7) / 8);
    if (mr == BG_GEMM_MR && nr == 8 * nv) { /* whole vectors: straight into C */
        bg__ukernel(kc, a, b, bs, c, ldc, alpha, beta, nv);
        return;
    }
    float tile[BG_GEMM_MR * BG_GEMM_NR];
    bg__ukernel(kc, a, b, bs, tile, BG_GEMM_NR, alpha, 0.0f, nv);
    bg__merge_tile(tile, c, ldc, mr, nr, beta);
}

/* Split n into the fewest blocks of at most `block`, of equal size rounded up to `unit`
 * (K = 288 becomes 144 + 144, not 256 + 32: a thin last slice costs a full pass over C). */
static inline int64_t bg__balanced_block(int64_t n, int64_t block, int64_t unit)
{
    const int64_t count = (n + block - 1) / block;
    const int64_t size = bg__round_up((n + count - 1) / count, unit);
    return size < block ? size : block;
}

/* Floats of the blocked path's A block: where its B block starts in the packing space. */
static inline int64_t bg__gemm_a_floats(int64_t M, int64_t K)
{
    const int64_t mc = bg__round_up(bg__min64(M, BG_GEMM_MC), BG_GEMM_MR);
    return bg__round_up(mc * bg__min64(K, BG_GEMM_KC), 16);
}

/* Floats of packing space the blocked path needs (A block, then B block). */
static inline int64_t bg__gemm_pack_floats(int64_t M, int64_t N, int64_t K)
{
    const int64_t nc = bg__round_up(bg__min64(N, BG_GEMM_NC), BG_GEMM_NR);
    return bg__gemm_a_floats(M, K) + nc * bg__min64(K, BG_GEMM_KC);
}

/* One GEMM C[M,N] = epilogue(alpha * op(A) @ op(B) + beta * C), M, N, K >= 1, alpha != 0:
 * what every thread working on it reads. */
typedef struct bg__gemm {
    int64_t M, N, K;
    float alpha, beta;
    int trans_a;
    const float *A;
    int64_t lda;
    const float *packed_a; /* NULL, or op(A) packed once ahead of time (bg_sgemm_pack_a) */
    const bg__bsrc *bsrc;
    float *C;
    int64_t ldc;
    const bg_epilogue *ep;
} bg__gemm;

/* One MR x NR tile of C (at row i, column j) whose B rows are read in place through
 * bsrc->rows: whole tiles straight into C with the epilogue in registers, edge tiles
 * through a scratch tile (every tile reads whole NR-wide rows of B). */
static inline void bg__tile_rows(const bg__gemm *g, int64_t kc, const float *a, const float *b,
                                 const int64_t *rows, int64_t i, int64_t j, int64_t mr,
                                 int64_t nr, float beta, int epilogue)
{
    float *c = g->C + i * g->ldc + j;
    if (mr == BG_GEMM_MR && nr == BG_GEMM_NR) {
        bg__tile_ep te;
        if (epilogue) bg__tile_ep_init(&te, g->ep, i, j);
        bg__ukernel_rows_w24(kc, a, b, rows, c, g->ldc, g->alpha, beta, epilogue ? &te : NULL);
        return;
    }
    float tile[BG_GEMM_MR * BG_GEMM_NR];
    bg__ukernel_rows_w24(kc, a, b, rows, tile, BG_GEMM_NR, g->alpha, 0.0f, NULL);
    bg__merge_tile(tile, c, g->ldc, mr, nr, beta);
    if (epilogue) bg__epilogue_block(c, g->ldc, i, j, mr, nr, g->ep);
}

/* Whether the micro-kernel reads B in place (a few rows of A use each B panel too few
 * times to pay for packing it); only a ragged last panel is packed. */
static inline int bg__gemm_direct_b(const bg__gemm *g)
{
    return g->bsrc->matrix && !g->bsrc->trans &&
           g->M <= BG_GEMM_DIRECT_B_MAX_M;
}

/* Rows [i0, i1) x columns [j0, j1) of the GEMM g, with i0 a multiple of MR and j0 of NR:
 * every tile is then the one the whole-matrix loop would compute (same MR x NR grid, same
 * K slices, same edge handling), so splitting C among threads changes no bit of it. */
static void bg__gemm_blocked(const bg__gemm *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                             float *ws)
{
    const int64_t MR = BG_GEMM_MR, NR = BG_GEMM_NR, M = g->M, N = g->N, K = g->K;
    const bg__bsrc *bsrc = g->bsrc;
    const int direct_b = bg__gemm_direct_b(g);
    const int epilogue = bg__epilogue_active(g->ep);
    float *const pa = ws;
    float *const pb = ws + bg__gemm_a_floats(M, K);
    float *const scratch = ws + bg__gemm_pack_floats(M, N, K);
    const int64_t kc_step = bg__balanced_block(K, BG_GEMM_KC, 1);
    /* With a single row block (M <= MC) a packed B block is used once, right after it is
     * packed: keep it small enough to stay in L2 rather than round-tripping through L3.
     * A is then re-packed per column block; blocks of at least 4*M columns keep that
     * re-packing under a quarter of B's packing. */
    int64_t nc_cap = BG_GEMM_NC;
    if (M <= BG_GEMM_MC && bsrc->pack) {
        nc_cap = BG_GEMM_SMALL_M_B_FLOATS / kc_step / NR * NR;
        if (nc_cap < bg__round_up(4 * M, NR)) nc_cap = bg__round_up(4 * M, NR);
        nc_cap = bg__min64(BG_GEMM_NC, nc_cap);
    }
    const int64_t nc_step = bg__balanced_block(j1 - j0, nc_cap, NR);
    for (int64_t jc = j0; jc < j1; jc += nc_step) {
        const int64_t nc = bg__min64(nc_step, j1 - jc);
        for (int64_t pc = 0; pc < K; pc += kc_step) {
            const int64_t kc = bg__min64(kc_step, K - pc);
            const float beta_k = pc == 0 ? g->beta : 1.0f; /* later slices accumulate */
            const int last_k = pc + kc == K;
            const int64_t n_full = nc / NR * NR;
            const float *bblock = pb;
            if (bsrc->rows) /* read in place: tiles index bsrc->data by row */
                bblock = NULL;
            else if (!bsrc->pack) /* prepacked: slice pc holds all panels, see bg_sgemm_pack_b */
                bblock = bsrc->data + pc * bg__round_up(N, NR) + jc * kc;
            else if (!direct_b)
                bsrc->pack(bsrc, pc, kc, jc, nc, pb, scratch);
            else if (n_full < nc) /* only the ragged last panel needs padding */
                bsrc->pack(bsrc, pc, kc, jc + n_full, nc - n_full, pb, scratch);
            for (int64_t ic = i0; ic < i1; ic += BG_GEMM_MC) {
                const int64_t mc = bg__min64(BG_GEMM_MC, i1 - ic);
                /* prepacked: slice pc holds all of A's panels, row block ic from panel ic/MR */
                const float *ablock = pa;
                if (g->packed_a)
                    ablock = g->packed_a + pc * bg__round_up(M, MR) + ic * kc;
                else
                    bg__pack_a(g->trans_a, g->A, g->lda, ic, mc, pc, kc, pa);
                for (int64_t jr = 0; jr < nc; jr += NR) {
                    const int64_t nr = bg__min64(NR, nc - jr);
                    if (bsrc->rows) {
                        for (int64_t ir = 0; ir < mc; ir += MR)
                            bg__tile_rows(g, kc, ablock + ir / MR * kc * MR,
                                          bsrc->data + jc + jr, bsrc->rows + pc, ic + ir,
                                          jc + jr, bg__min64(MR, mc - ir), nr, beta_k,
                                          last_k && epilogue);
                        continue;
                    }
                    const float *b = bblock + jr / NR * kc * NR;
                    int64_t bs = NR;
                    if (direct_b) {
                        b = jr < n_full ? bsrc->data + pc * bsrc->ld + jc + jr : pb;
                        bs = jr < n_full ? bsrc->ld : NR;
                    }
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        const int64_t mr = bg__min64(MR, mc - ir);
                        const float *a = ablock + ir / MR * kc * MR;
                        float *c = g->C + (ic + ir) * g->ldc + jc + jr;
                        if (mr == MR && nr == NR && last_k && epilogue) {
                            bg__tile_ep te;
                            bg__tile_ep_init(&te, g->ep, ic + ir, jc + jr);
                            bg__ukernel_w24(kc, a, b, bs, c, g->ldc, g->alpha, beta_k, &te);
                        } else if (mr == MR && nr == NR) {
                            bg__ukernel_w24(kc, a, b, bs, c, g->ldc, g->alpha, beta_k, NULL);
                        } else {
                            bg__ukernel_edge(kc, a, b, bs, c, g->ldc, mr, nr, g->alpha, beta_k);
                            if (last_k && epilogue)
                                bg__epilogue_block(c, g->ldc, ic + ir, jc + jr, mr, nr, g->ep);
                        }
                    }
                }
            }
        }
    }
}

/* Below this many multiply-adds a GEMM runs on one thread: waking the pool would cost more
 * than the threads gain. */
#define BG_GEMM_PARALLEL_MIN_MACS (128 * 1024)

/* A GEMM cut into a grid of blocks of C, one block per task. */
typedef struct bg__gemm_split {
    const bg__gemm *g;
    int64_t row_step, col_step, col_tasks;
} bg__gemm_split;

static void bg__gemm_task(const void *ctx, int64_t task, void *ws)
{
    const bg__gemm_split *s = (const bg__gemm_split *)ctx;
    const int64_t i0 = task / s->col_tasks * s->row_step, j0 = task % s->col_tasks * s->col_step;
    bg__gemm_blocked(s->g, i0, bg__min64(i0 + s->row_step, s->g->M), j0,
                     bg__min64(j0 + s->col_step, s->g->N), bg__align64(ws));
}

/* Estimated time of one block of rows x cols: its multiply-adds (whole tiles) plus the
 * packing it repeats in every block, at a sixteenth of the multiply-add rate. */
static inline int64_t bg__gemm_block_cost(const bg__gemm *g, int64_t rows, int64_t cols)
{
    const int64_t K = g->K;
    int64_t cost = bg__round_up(rows, BG_GEMM_MR) * bg__round_up(cols, BG_GEMM_NR) * K;
    if (!g->packed_a) cost += 16 * rows * K;
    if (g->bsrc->pack) cost += 16 * cols * K;
    return cost + 4096; /* a task's fixed cost */
}

/* The grid (row_step x col_step blocks, on the MR x NR tile grid) that finishes soonest on
 * `threads` threads, with at most two blocks per thread. */
static bg__gemm_split bg__gemm_plan(const bg__gemm *g, int threads)
{
    const int64_t row_panels = (g->M + BG_GEMM_MR - 1) / BG_GEMM_MR;
    const int64_t col_panels = (g->N + BG_GEMM_NR - 1) / BG_GEMM_NR;
    const int64_t max_tasks = 2 * (int64_t)threads;
    bg__gemm_split best = {g, g->M, g->N, 1};
    int64_t best_time = bg__gemm_block_cost(g, g->M, g->N), best_tasks = 1;
    for (int64_t c = 1; c <= bg__min64(col_panels, max_tasks); ++c)
        for (int64_t r = 1; r <= bg__min64(row_panels, max_tasks / c); ++r) {
            const int64_t col_step = (col_panels + c - 1) / c * BG_GEMM_NR;
            const int64_t row_step = (row_panels + r - 1) / r * BG_GEMM_MR;
            const int64_t tasks = ((g->N + col_step - 1) / col_step) *
                                  ((g->M + row_step - 1) / row_step);
            const int64_t rounds = (tasks + threads - 1) / threads;
            const int64_t time = rounds * bg__gemm_block_cost(g, bg__min64(row_step, g->M),
                                                              bg__min64(col_step, g->N));
            if (time < best_time || (time == best_time && tasks < best_tasks)) {
                best = (bg__gemm_split){g, row_step, col_step, (g->N + col_step - 1) / col_step};
                best_time = time;
                best_tasks = tasks;
            }
        }
    return best;
}

static void bg__gemm_split_run(const bg__gemm *g, float *ws, bg_threadpool *pool)
{
    const bg__gemm_split split = bg__gemm_plan(g, bg_threadpool_threads(pool));
    const int64_t tasks = split.col_tasks * ((g->M + split.row_step - 1) / split.row_step);
    bg_parallel(pool, tasks, bg__gemm_task, &split, ws);
}

/* B packed once for every row block: its panels shared out among the threads, into the
 * caller's packing space. */
typedef struct bg__shared_b {
    const bg__gemm *g;
    float *packed; /* K x round_up(N, NR): one K slice, in bg_sgemm_pack_b's layout */
    int64_t panels_per_task;
} bg__shared_b;

static void bg__shared_b_task(const void *ctx, int64_t task, void *ws)
{
    const bg__shared_b *s = (const bg__shared_b *)ctx;
    const bg__gemm *g = s->g;
    const int64_t j0 = task * s->panels_per_task * BG_GEMM_NR;
    const int64_t nc = bg__min64(s->panels_per_task * BG_GEMM_NR, g->N - j0);
    float *const scratch = bg__align64(ws) + bg__gemm_pack_floats(g->M, g->N, g->K);
    g->bsrc->pack(g->bsrc, 0, g->K, j0, nc, s->packed + j0 * g->K, scratch);
}

/* Whether g should pack B once for all threads: when the best split cuts C into row blocks
 * (N narrow against M: few output pixels, many filters, as in the 1x1 and strided
 * convolutions of a CNN's later stages), each block would pack all of B itself. Only where
 * B is one K slice, which the caller's packing space holds whole; with more slices, a
 * fork-join per slice cost more than the packing it saved (ResNet-50's 14x14 stage). */
static int bg__gemm_shares_b(const bg__gemm *g, int threads)
{
    if (!g->bsrc->pack || bg__gemm_direct_b(g) || g->K > BG_GEMM_KC || g->N > BG_GEMM_NC)
        return 0;
    return bg__gemm_plan(g, threads).row_step < g->M;
}

/* g with B packed once, then split as for a prepacked B. Every tile is computed as the
 * blocked loop computes it, so the bits are the same. */
static void bg__gemm_run_shared_b(const bg__gemm *g, float *ws, bg_threadpool *pool)
{
    const int64_t NR = BG_GEMM_NR, M = g->M, N = g->N, K = g->K;
    float *const packed = ws + bg__gemm_a_floats(M, K); /* bg__gemm_blocked's B block */
    const int64_t panels = (N + NR - 1) / NR, blocks = 2 * (int64_t)bg_threadpool_threads(pool);
    const bg__shared_b job = {g, packed, (panels + blocks - 1) / blocks};
    bg_parallel(pool, (panels + job.panels_per_task - 1) / job.panels_per_task,
                bg__shared_b_task, &job, ws);
    const bg__bsrc prepacked = {NULL, packed, 0, 0, NULL, NULL, 0};
    bg__gemm shared = *g;
    shared.bsrc = &prepacked;
    bg__gemm_split_run(&shared, ws, pool);
}

/* The GEMM g on the pool's threads (or the caller's alone); ws is the caller's workspace.
 * An entry point (of the GEMM family, bg_kernels_linked.h) for the convolution, whose
 * B operand is a bg__bsrc of its own (implicit im2col). */
BG_API void bg__gemm_run(const bg__gemm *g, float *ws, bg_threadpool *pool)
{
    const int threads = bg_threadpool_threads(pool);
    if (threads < 2 || g->M * g->N * g->K < BG_GEMM_PARALLEL_MIN_MACS)
        bg__gemm_blocked(g, 0, g->M, 0, g->N, ws);
    else if (bg__gemm_shares_b(g, threads))
        bg__gemm_run_shared_b(g, ws, pool);
    else
        bg__gemm_split_run(g, ws, pool);
}

#include "bg_gemv.h"

BG_API size_t bg_sgemm_workspace_bytes(int64_t M, int64_t N, int64_t K)
{
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    int64_t floats = bg__gemm_pack_floats(M, N, K);
    const int64_t gemv = bg__gemv_floats(M, N, K);
    if (gemv > floats) floats = gemv;
    return (size_t)floats * sizeof(float) + 64; /* + slack to align the start */
}

/* K == 0 or alpha == 0: C = epilogue(beta * C); as in BLAS, A and B are not read. */
static inline void bg__gemm_no_product(int64_t M, int64_t N, float beta, float *C, int64_t ldc,
                                       const bg_epilogue *ep)
{
    for (int64_t i = 0; i < M; ++i) {
        float *c = C + i * ldc;
        for (int64_t j = 0; j < N; ++j) c[j] = beta == 0.0f ? 0.0f : beta * c[j];
    }
    if (bg__epilogue_active(ep)) bg__epilogue_block(C, ldc, 0, 0, M, N, ep);
}

/* Row-major single-precision GEMM: C[M,N] = epilogue(alpha * op(A) @ op(B) + beta * C).
 * op(A) is A[M,K] (lda >= K) or, with trans_a, A stored as [K,M] (lda >= M); likewise B.
 * beta == 0 means C is not read (may hold garbage/NaN). pool: NULL (the caller's thread
 * only) or the instance's pool, whose workers bring their own workspace. */
BG_API void bg_sgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                     const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                     float *C, int64_t ldc, const bg_epilogue *ep, void *workspace,
                     bg_threadpool *pool)
{
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        bg__gemm_no_product(M, N, beta, C, ldc, ep);
        return;
    }
    float *ws = bg__align64(workspace);
    if (M == 1 || N == 1) {
        bg__gemv(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep, ws, pool);
        return;
    }
    const bg__bsrc bsrc = {bg__pack_b_matrix, B, ldb, trans_b, NULL, NULL, 1};
    const bg__gemm g = {M, N, K, alpha, beta, trans_a, A, lda, NULL, &bsrc, C, ldc, ep};
    bg__gemm_run(&g, ws, pool);
}

/* ---- Prepacked B: for a constant op(B) (weights), pack once at load time ----
 * The packed form depends on (trans_b, N, K) only: for each K slice (as bg_sgemm cuts K),
 * all NR-wide micro-panels of that slice, in order. The bytes are position-independent
 * (they may be copied, e.g. into a weights blob); the buffer needs float alignment, and
 * 64-byte alignment is fastest. */

BG_API size_t bg_sgemm_packed_b_bytes(int64_t N, int64_t K)
{
    if (N <= 0 || K <= 0) return 0;
    return (size_t)(bg__round_up(N, BG_GEMM_NR) * K) * sizeof(float);
}

BG_API void bg_sgemm_pack_b(int trans_b, int64_t N, int64_t K, const float *B, int64_t ldb,
                            void *packed)
{
    if (N <= 0 || K <= 0) return;
    const bg__bsrc src = {bg__pack_b_matrix, B, ldb, trans_b, NULL, NULL, 1};
    const int64_t kc_step = bg__balanced_block(K, BG_GEMM_KC, 1);
    float *dst = (float *)packed;
    for (int64_t pc = 0; pc < K; pc += kc_step)
        bg__pack_b_matrix(&src, pc, bg__min64(kc_step, K - pc), 0, N,
                          dst + pc * bg__round_up(N, BG_GEMM_NR), NULL);
}

/* bg_sgemm with op(B) from bg_sgemm_pack_b (same N, K); workspace and pool as bg_sgemm's. */
BG_API void bg_sgemm_prepacked(int trans_a, int64_t M, int64_t N, int64_t K, float alpha,
                               const float *A, int64_t lda, const void *packed_b, float beta,
                               float *C, int64_t ldc, const bg_epilogue *ep, void *workspace,
                               bg_threadpool *pool)
{
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        bg__gemm_no_product(M, N, beta, C, ldc, ep);
        return;
    }
    const bg__bsrc bsrc = {NULL, (const float *)packed_b, 0, 0, NULL, NULL, 0};
    const bg__gemm g = {M, N, K, alpha, beta, trans_a, A, lda, NULL, &bsrc, C, ldc, ep};
    bg__gemm_run(&g, bg__align64(workspace), pool);
}

/* ---- Prepacked A: for a constant op(A) (a convolution's filters), pack once at load time ----
 * The packed form depends on (trans_a, M, K) only: for each K slice (as bg_sgemm cuts K),
 * all MR-tall micro-panels of op(A), in order. Position-independent, like packed B. */

BG_API size_t bg_sgemm_packed_a_bytes(int64_t M, int64_t K)
{
    if (M <= 0 || K <= 0) return 0;
    return (size_t)(bg__round_up(M, BG_GEMM_MR) * K) * sizeof(float);
}

BG_API void bg_sgemm_pack_a(int trans_a, int64_t M, int64_t K, const float *A, int64_t lda,
                            void *packed)
{
    if (M <= 0 || K <= 0) return;
    const int64_t kc_step = bg__balanced_block(K, BG_GEMM_KC, 1);
    float *dst = (float *)packed;
    for (int64_t pc = 0; pc < K; pc += kc_step)
        bg__pack_a(trans_a, A, lda, 0, M, pc, bg__min64(kc_step, K - pc),
                   dst + pc * bg__round_up(M, BG_GEMM_MR));
}

#endif /* BG_GEMM_H */
