/* bg_window.h — one output row of a 2-D sliding window (part of bg_kernels.h).
 *
 * Shared by depthwise convolution (weighted sum), max pooling and average pooling (sum).
 * A row splits into edge columns, whose windows cross the left/right padding and are
 * computed tap by tap with bounds checks, and interior columns, whose windows lie inside
 * the image row: those run without checks, eight outputs per vector and four vectors at a
 * time (independent accumulators hide the FMA/compare latency), for stride 1 and 2.
 * (Depthwise convolution reads a zero-padded copy of each plane, so it has no edges.)
 */
#ifndef BG_KERNELS_H
#error "include bg_kernels.h, not bg_window.h"
#endif
#ifndef BG_WINDOW_H
#define BG_WINDOW_H

enum bg__window_op { BG__WIN_WSUM, BG__WIN_MAX, BG__WIN_SUM };

typedef struct bg__window {
    int64_t H, W, OW, KH, KW, sh, sw, dh, dw, pad_top, pad_left;
    int64_t ow_a, ow_b; /* interior columns [ow_a, ow_b): every kw tap inside the row */
} bg__window;

static inline bg__window bg__window_make(int64_t H, int64_t W, int64_t OW, int64_t KH,
                                         int64_t KW, int64_t sh, int64_t sw, int64_t dh,
                                         int64_t dw, int64_t pad_top, int64_t pad_left)
{
    bg__window w = {H, W, OW, KH, KW, sh, sw, dh, dw, pad_top, pad_left, 0, 0};
    /* Taps move right as kw grows: kw = 0 bounds the interior on the left, KW-1 on the right. */
    int64_t lo0, hi0, lo1, hi1;
    bg__valid_range(-pad_left, sw, W, OW, &lo0, &hi0);
    bg__valid_range((KW - 1) * dw - pad_left, sw, W, OW, &lo1, &hi1);
    w.ow_a = lo0;
    w.ow_b = hi1 > lo0 ? hi1 : lo0;
    return w;
}

#define BG__WIN_COMBINE(op, acc, xv, wv)                                                           \
    do {                                                                                           \
        if ((op) == BG__WIN_WSUM)                                                                  \
            (acc) = BG_FMA8((wv), (xv), (acc));                                                    \
        else if ((op) == BG__WIN_MAX)                                                              \
            (acc) = BG_BLEND8((xv) > (acc), (xv), (acc));                                          \
        else                                                                                       \
            (acc) += (xv);                                                                         \
    } while (0)

/* The scalar twin of BG__WIN_COMBINE (same NaN behaviour for max: a NaN x is skipped). */
static inline float bg__win_combine1(int op, float acc, float x, float w)
{
    return op == BG__WIN_WSUM ? acc + w * x : op == BG__WIN_MAX ? (x > acc ? x : acc) : acc + x;
}

/* Eight inputs for consecutive outputs starting at p (input step sw = 1 or 2). Stride 2
 * loads p[0..8) and p[7..15), never p[15], which may lie past the row's last input. */
#if defined(__AVX2__)
/* Stride 2 on AVX2: one in-lane shuffle and one 64-bit permute (GCC would lower the generic
 * shuffle below to two vpermd and a blend, half the speed). */
#define BG__WIN_LOAD(xv, p, sw)                                                                    \
    do {                                                                                           \
        if ((sw) == 1) {                                                                           \
            BG_LOAD8((xv), (p));                                                                   \
        } else {                                                                                   \
            bg_v8f lo_, hi_;                                                                       \
            BG_LOAD8(lo_, (p));                                                                    \
            BG_LOAD8(hi_, (p) + 7);                                                                \
            /* vshufps: p0 p2 p8 p10 | p4 p6 p12 p14, then vpermpd puts the 64-bit pairs in order */ \
            const bg_v8f t_ = __builtin_ia32_shufps256(lo_, hi_, 0xD8);                            \
            (xv) = (bg_v8f)__builtin_ia32_permdf256((bg_v4d)t_, 0xD8);                             \
        }                                                                                          \
    } while (0)
#elif defined(BG_HAVE_SHUFFLEVECTOR)
#define BG__WIN_LOAD(xv, p, sw)                                                                    \
    do {                                                                                           \
        if ((sw) == 1) {                                                                           \
            BG_LOAD8((xv), (p));                                                                   \
        } else {                                                                                   \
            bg_v8f lo_, hi_;                                                                       \
            BG_LOAD8(lo_, (p));                                                                    \
            BG_LOAD8(hi_, (p) + 7);                                                                \
            (xv) = BG__SHUF(lo_, hi_, 0, 2, 4, 6, 9, 11, 13, 15);                                  \
        }                                                                                          \
    } while (0)
#else
#define BG__WIN_LOAD(xv, p, sw) BG_LOAD8((xv), (p)) /* only stride 1 is vectorized */
#endif

/* nvec (1..4) vectors of 8 interior outputs from ow, with input rows kh_a..kh_b-1; the first
 * input of kernel row kh is x[(ih0 + kh*dh)*W + ow*sw]. The vectors' offsets are fixed
 * (8, 16, 24) so that, specialised for sw == 1, loads use constant displacements. */
__attribute__((always_inline)) static inline void
bg__window_vec(const bg__window *w, int op, const float *x, const float *wts, int64_t ih0,
               int64_t kh_a, int64_t kh_b, int64_t ow, int nvec, float init, float *yr)
{
    const int64_t sw = w->sw, d1 = 8 * sw, d2 = 16 * sw, d3 = 24 * sw;
    bg_v8f a0 = BG_SPLAT8(init), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t kh = kh_a; kh < kh_b; ++kh) {
        const float *xr = x + (ih0 + kh * w->dh) * w->W - w->pad_left + ow * sw;
        for (int64_t kw = 0; kw < w->KW; ++kw) {
            const float *p = xr + kw * w->dw;
            const bg_v8f wv = BG_SPLAT8(op == BG__WIN_WSUM ? wts[kh * w->KW + kw] : 0.0f);
            bg_v8f xv;
            BG__WIN_LOAD(xv, p, sw);
            BG__WIN_COMBINE(op, a0, xv, wv);
            if (nvec > 1) {
                BG__WIN_LOAD(xv, p + d1, sw);
                BG__WIN_COMBINE(op, a1, xv, wv);
            }
            if (nvec > 2) {
                BG__WIN_LOAD(xv, p + d2, sw);
                BG__WIN_COMBINE(op, a2, xv, wv);
            }
            if (nvec > 3) {
                BG__WIN_LOAD(xv, p + d3, sw);
                BG__WIN_COMBINE(op, a3, xv, wv);
            }
        }
    }
    BG_STORE8(yr + ow, a0);
    if (nvec > 1) BG_STORE8(yr + ow + 8, a1);
    if (nvec > 2) BG_STORE8(yr + ow + 16, a2);
    if (nvec > 3) BG_STORE8(yr + ow + 24, a3);
}

/* One output, tap by tap; `check` skips taps outside the image row (edge columns). */
__attribute__((always_inline)) static inline float
bg__window_one(const bg__window *w, int op, const float *x, const float *wts, int64_t ih0,
               int64_t kh_a, int64_t kh_b, int64_t ow, int check, float init)
{
    float acc = init;
    const int64_t iw = ow * w->sw - w->pad_left;
    int64_t kw_a = 0, kw_b = w->KW; /* taps whose input column exists */
    if (check) bg__valid_range(iw, w->dw, w->W, w->KW, &kw_a, &kw_b);
    for (int64_t kh = kh_a; kh < kh_b; ++kh) {
        const float *xr = x + (ih0 + kh * w->dh) * w->W;
        const float *wr = op == BG__WIN_WSUM ? wts + kh * w->KW : NULL;
        for (int64_t kw = kw_a; kw < kw_b; ++kw)
            acc = bg__win_combine1(op, acc, xr[iw + kw * w->dw], wr ? wr[kw] : 0.0f);
    }
    return acc;
}

/* yr[0:OW] = the window op over output row oh of plane x; wts: KH*KW weights (WSUM only).
 * Windows with no tap inside the image get the op's identity (0, or -inf for max).
 * Always inlined so that each caller gets a copy specialised for its constant op. */
__attribute__((always_inline)) static inline void
bg__window_row(const bg__window *w, int op, const float *x, const float *wts, int64_t oh,
               float *yr)
{
    const float init = op == BG__WIN_MAX ? -INFINITY : 0.0f;
    const int64_t ih0 = oh * w->sh - w->pad_top;
    int64_t kh_a, kh_b; /* taps whose input row exists */
    bg__valid_range(ih0, w->dh, w->H, w->KH, &kh_a, &kh_b);
#if defined(__AVX2__) || defined(BG_HAVE_SHUFFLEVECTOR)
    const int vector_ok = w->sw == 1 || w->sw == 2;
#else
    const int vector_ok = w->sw == 1;
#endif
    for (int64_t ow = 0; ow < w->ow_a; ++ow)
        yr[ow] = bg__window_one(w, op, x, wts, ih0, kh_a, kh_b, ow, 1, init);
    int64_t ow = w->ow_a;
    if (vector_ok && w->ow_b - w->ow_a >= 8) {
        for (; ow + 32 <= w->ow_b; ow += 32)
            bg__window_vec(w, op, x, wts, ih0, kh_a, kh_b, ow, 4, init, yr);
        /* The rest (< 32) as up to four independent vectors, shifted left to end at ow_b
         * (recomputing a few outputs) when the interior allows; otherwise whole vectors from
         * ow plus one last vector overlapping them. */
        int64_t nvec = (w->ow_b - ow + 7) / 8;
        if (nvec > 0 && w->ow_b - 8 * nvec >= w->ow_a) {
            bg__window_vec(w, op, x, wts, ih0, kh_a, kh_b, w->ow_b - 8 * nvec, (int)nvec, init,
                           yr);
        } else if (nvec > 0) {
            nvec = (w->ow_b - ow) / 8;
            bg__window_vec(w, op, x, wts, ih0, kh_a, kh_b, ow, (int)nvec, init, yr);
            if (ow + 8 * nvec < w->ow_b)
                bg__window_vec(w, op, x, wts, ih0, kh_a, kh_b, w->ow_b - 8, 1, init, yr);
        }
        ow = w->ow_b;
    }
    for (; ow < w->ow_b; ++ow)
        yr[ow] = bg__window_one(w, op, x, wts, ih0, kh_a, kh_b, ow, 0, init);
    for (; ow < w->OW; ++ow)
        yr[ow] = bg__window_one(w, op, x, wts, ih0, kh_a, kh_b, ow, 1, init);
}

#endif /* BG_WINDOW_H */
