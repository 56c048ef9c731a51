/* bg_conv_depthwise.h — the direct form: convolutions with one input channel per group
 * (part of bg_conv.h, through bg_kernels.h; include that instead). */
#ifndef BG_CONV_H
#error "include bg_kernels.h, not bg_conv_depthwise.h"
#endif

/* ---- Convolutions with one input channel per group (depthwise) ----
 * Output channel m reads input channel m / (M / group): a weighted sliding window over a
 * plane whose windows all lie inside it (the zero-padded copy when there is padding), so
 * there are no edge columns. Outputs go in blocks of R rows x NV vectors of 8 (1 x 4; for
 * narrower rows 2 x 3 or 4 x 1), so independent accumulators hide the FMA latency. A row's
 * last < 32 columns are one step of 1-3 vectors ending at the row's end (recomputing a few
 * outputs rather than running a scalar tail). The epilogue is applied in
 * registers. Each output's taps are summed in the same order, whatever its block. */
typedef struct bg__dw_plane {
    const float *x; /* the plane the windows read, ld floats a row */
    const float *w; /* KH*KW taps */
    int64_t ld, OH, OW, KH, KW, sh, sw, dh, dw;
    const bg_epilogue *ep; /* NULL when it changes nothing */
    bg__row_affine affine; /* the output channel's scale and bias */
} bg__dw_plane;

/* The activations the block applies out of line (sigmoid, tanh, leaky relu): inlined into
 * every block copy, their polynomials multiplied the kernels' compile time. */
__attribute__((noinline)) static void bg__dw_act8(bg_v8f *v, const bg_epilogue *ep)
{
    bg__act8(v, ep);
}

/* R x NV (constants: R * NV <= 8) vectors of outputs: rows oh.., columns ow.. of y. */
__attribute__((always_inline)) static inline void
bg__dw_block(const bg__dw_plane *d, int64_t oh, int64_t ow, int R, int NV, int64_t sw, float *y)
{
    bg_v8f acc[4][4];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) acc[r][v] = BG_SPLAT8(0.0f);
    const float *x0 = d->x + oh * d->sh * d->ld + ow * sw;
    for (int64_t kh = 0; kh < d->KH; ++kh)
        for (int64_t kw = 0; kw < d->KW; ++kw) {
            const bg_v8f wv = BG_SPLAT8(d->w[kh * d->KW + kw]);
            const float *xk = x0 + kh * d->dh * d->ld + kw * d->dw;
            for (int r = 0; r < R; ++r)
                for (int v = 0; v < NV; ++v) {
                    bg_v8f xv;
                    BG__WIN_LOAD(xv, xk + r * d->sh * d->ld + 8 * v * sw, sw);
                    acc[r][v] = BG_FMA8(wv, xv, acc[r][v]);
                }
        }
    if (d->ep) { /* bg__epilogue_row's operations, in its order */
        const bg_v8f scale = BG_SPLAT8(d->affine.scale_scalar);
        const bg_v8f bias = BG_SPLAT8(d->affine.bias_scalar), zero = BG_SPLAT8(0.0f);
        const bg_v8f lo = BG_SPLAT8(d->ep->act_alpha), hi = BG_SPLAT8(d->ep->act_beta);
        const int scaled = d->ep->scale != NULL, act = d->ep->act;
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < NV; ++v) {
                bg_v8f a = acc[r][v];
                if (scaled) a *= scale;
                a += bias;
                if (act == BG_ACT_RELU) {
                    a = BG_BLEND8(a > zero, a, zero);
                } else if (act == BG_ACT_CLIP) {
                    a = BG_BLEND8(a < lo, lo, a);
                    a = BG_BLEND8(a > hi, hi, a);
                } else if (act == BG_ACT_HARDSWISH) {
                    /* inline, as ReLU: through bg__dw_act8 a call per 8 outputs doubled
                     * PP-LCNet's depthwise layers (64 at 56x56: 150-190 -> 340 us) */
                    BG__HARDSWISH(a, bg_v8f, BG_SPLAT8, BG_BLEND8);
                } else if (act != BG_ACT_NONE) {
                    bg__dw_act8(&a, d->ep);
                }
                acc[r][v] = a;
            }
    }
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) BG_STORE8(y + (oh + r) * d->OW + ow + 8 * v, acc[r][v]);
}

/* Rows oh..oh+R-1 (R, sw constants), every column: steps of 32, then one ending at OW. */
__attribute__((always_inline)) static inline void bg__dw_row_block(const bg__dw_plane *d,
                                                                   int64_t oh, int R, int sw,
                                                                   float *y)
{
    const int64_t OW = d->OW;
    int64_t ow = 0;
    if (R < 4) /* rows of 16 or more: four rows at once are only taken below that */
        for (; ow + 32 <= OW; ow += 32) bg__dw_block(d, oh, ow, R, 4, sw, y);
    const int64_t rest = OW - ow, nv = (rest + 7) / 8;
    if (rest == 0) return;
    if (OW >= 8 * nv) { /* one step ending at OW */
        if (nv == 1) bg__dw_block(d, oh, OW - 8, R, 1, sw, y);
        else if (nv == 2 || R == 4) bg__dw_block(d, oh, OW - 16, R, 2, sw, y);
        else if (nv == 3) bg__dw_block(d, oh, OW - 24, R, 3, sw, y);
        else bg__dw_block(d, oh, OW - 32, R, 4, sw, y);
    } else { /* 8 < OW < 8 * nv (so ow = 0): whole vectors, then one ending at OW */
        if (rest >= 24 && R < 4) bg__dw_block(d, oh, 0, R, 3, sw, y);
        else if (rest >= 16 && R < 4) bg__dw_block(d, oh, 0, R, 2, sw, y);
        else bg__dw_block(d, oh, 0, R, 1, sw, y);
        bg__dw_block(d, oh, OW - 8, R, 1, sw, y);
    }
}

/* Rows [oh0, oh1) of the plane, R at a time, at stride SW: one copy per (R, SW), compiled
 * once. (Inlined everywhere, the blocks made the kernels object's compile 13x slower at the
 * x86-64 baseline.) */
#define BG__DW_ROWS(R, SW)                                                                         \
    __attribute__((noinline)) static void bg__dw_rows_##R##_##SW(const bg__dw_plane *d,           \
                                                                 int64_t oh0, int64_t oh1,         \
                                                                 float *y)                         \
    {                                                                                              \
        for (int64_t oh = oh0; oh + (R) <= oh1; oh += (R)) bg__dw_row_block(d, oh, R, SW, y);      \
    }
BG__DW_ROWS(1, 1)
BG__DW_ROWS(1, 2)
#if BG_NATIVE_V8 /* 128-bit registers hold too few accumulators for several rows */
BG__DW_ROWS(2, 1)
BG__DW_ROWS(4, 1)
BG__DW_ROWS(2, 2)
BG__DW_ROWS(4, 2)
#endif
#undef BG__DW_ROWS

/* Every output row of the plane (OW >= 8), at stride sw (1 or 2): rows too narrow for four
 * vectors take several at once (measured: wider rows are faster one at a time). */
static void bg__dw_rows(const bg__dw_plane *d, int sw, float *y)
{
#if BG_NATIVE_V8
    const int R = d->OW < 16 ? 4 : d->OW < 32 ? 2 : 1;
#else
    const int R = 1;
#endif
    const int64_t blocked = d->OH / R * R;
#if BG_NATIVE_V8
    if (R == 4 && sw == 1) bg__dw_rows_4_1(d, 0, blocked, y);
    if (R == 2 && sw == 1) bg__dw_rows_2_1(d, 0, blocked, y);
    if (R == 4 && sw == 2) bg__dw_rows_4_2(d, 0, blocked, y);
    if (R == 2 && sw == 2) bg__dw_rows_2_2(d, 0, blocked, y);
#endif
    if (sw == 1)
        bg__dw_rows_1_1(d, R == 1 ? 0 : blocked, d->OH, y);
    else
        bg__dw_rows_1_2(d, R == 1 ? 0 : blocked, d->OH, y);
}

/* The same outputs one at a time (rows narrower than a vector, strides above 2). */
static void bg__dw_rows_scalar(const bg__dw_plane *d, float *y)
{
    for (int64_t oh = 0; oh < d->OH; ++oh)
        for (int64_t ow = 0; ow < d->OW; ++ow) {
            const float *xr = d->x + oh * d->sh * d->ld + ow * d->sw;
            float acc = 0.0f;
            for (int64_t kh = 0; kh < d->KH; ++kh)
                for (int64_t kw = 0; kw < d->KW; ++kw)
                    acc += d->w[kh * d->KW + kw] * xr[kh * d->dh * d->ld + kw * d->dw];
            y[oh * d->OW + ow] = acc;
        }
    if (d->ep)
        for (int64_t oh = 0; oh < d->OH; ++oh)
            bg__epilogue_row(y + oh * d->OW, d->OW, &d->affine, d->ep);
}

/* Rows narrower than a vector, at stride 1: the plane read flat, as one long row (output
 * (oh, ow) at oh*ld + ow, the columns past OW computed and dropped), a band of rows at a
 * time through a small buffer. Each output sums the same taps in the same order. */
#define BG__DW_FLAT_FLOATS 1024
static void bg__dw_rows_flat(const bg__dw_plane *d, float *y)
{
    float flat[BG__DW_FLAT_FLOATS];
    const int64_t band = bg__max64(1, (BG__DW_FLAT_FLOATS - d->OW) / d->ld + 1);
    for (int64_t oh0 = 0; oh0 < d->OH; oh0 += band) {
        const int64_t rows = bg__min64(band, d->OH - oh0);
        bg__dw_plane line = *d;
        line.x = d->x + oh0 * d->ld;
        line.OH = 1;
        line.OW = (rows - 1) * d->ld + d->OW;
        bg__dw_rows(&line, 1, flat);
        for (int64_t r = 0; r < rows; ++r)
            memcpy(y + (oh0 + r) * d->OW, flat + r * d->ld, (size_t)d->OW * sizeof(float));
    }
}

/* One (image, channel) plane's output channel through its specialised loop. */
static void bg__dw_plane_run(const bg__dw_plane *d, float *y)
{
    if (d->OW < 8 && d->sh == 1 && d->sw == 1 && (d->OH - 1) * d->ld + d->OW >= 8 &&
        d->ld + d->OW <= BG__DW_FLAT_FLOATS) {
        bg__dw_rows_flat(d, y);
        return;
    }
#if defined(__AVX2__) || defined(BG_HAVE_SHUFFLEVECTOR)
    const int vector_ok = d->OW >= 8 && (d->sw == 1 || d->sw == 2);
#else
    const int vector_ok = d->OW >= 8 && d->sw == 1;
#endif
    if (!vector_ok) {
        bg__dw_rows_scalar(d, y);
        return;
    }
    bg__dw_rows(d, (int)d->sw, y);
}

typedef struct bg__conv_direct {
    const bg_conv2d_params *p;
    const float *X, *Wt;
    const bg_epilogue *ep;
    float *Y;
    int64_t planes_per_task;
} bg__conv_direct;

/* Rows [0, OH) of the padded copy's interior: the input rows, shifted right by pad_left.
 * The border (padding) is zeroed once per task, so each plane only rewrites this. */
static inline void bg__pad_interior(const bg_conv2d_params *p, const float *x, int64_t hp,
                                    int64_t wp, float *dst)
{
    const int64_t top = p->pad_top, left = p->pad_left;
    const int64_t rows = bg__min64(p->H, hp - top), cols = bg__min64(p->W, wp - left);
    if (cols <= 0) return;
    for (int64_t r = 0; r < rows; ++r) memcpy(dst + (top + r) * wp + left, x + r * p->W,
                                              (size_t)cols * sizeof(float));
}

/* A chunk of input planes (image n, channel c): each plane's output channels, through
 * one padded copy whose border is zeroed once for the chunk. */
static void bg__conv2d_direct_task(const void *ctx, int64_t task, void *workspace)
{
    const bg__conv_direct *t = (const bg__conv_direct *)ctx;
    const bg_conv2d_params *p = t->p;
    const int64_t Mg = p->M / p->group, first = task * t->planes_per_task;
    const int64_t last = bg__min64(first + t->planes_per_task, p->N * p->C);
    int64_t hp, wp;
    const int copy = bg__conv_direct_copy(p, &hp, &wp);
    float *const padded = bg__align64(workspace);
    if (copy) memset(padded, 0, (size_t)(hp * wp) * sizeof(float));
    bg__dw_plane d = {NULL, NULL, copy ? wp : p->W, p->OH, p->OW, p->KH, p->KW,
                      p->stride_h, p->stride_w, p->dil_h, p->dil_w,
                      bg__epilogue_active(t->ep) ? t->ep : NULL, {NULL, NULL, 1.0f, 0.0f}};
    for (int64_t plane = first; plane < last; ++plane) {
        const int64_t n = plane / p->C, c = plane % p->C;
        d.x = t->X + plane * p->H * p->W;
        if (copy) {
            bg__pad_interior(p, d.x, hp, wp, padded);
            d.x = padded;
        }
        for (int64_t m = c * Mg; m < (c + 1) * Mg; ++m) {
            d.w = t->Wt + m * p->KH * p->KW;
            /* The bias and scale are per output channel: one value for the whole plane. */
            d.affine.scale_scalar = t->ep && t->ep->scale ? t->ep->scale[m] : 1.0f;
            d.affine.bias_scalar = t->ep && t->ep->bias ? t->ep->bias[m] : 0.0f;
            bg__dw_plane_run(&d, t->Y + (n * p->M + m) * p->OH * p->OW);
        }
    }
}

/* ---- Depthwise convolutions over small planes, channels last ----
 * A plane narrower than a vector leaves most lanes of the per-plane loops idle, and each
 * plane pays their calls. Here the vector runs across 8 channels instead: a task takes 8
 * channels of one image, copies them into a zero-padded channels-last block (pixel-major,
 * 8 floats a pixel), sums each output's taps over whole vectors, 4 outputs at a time, and
 * copies the results back into the planes. Measured 3-6x on MobileNetV2's 12x12..6x6
 * stride-2 layers and its 3x3 planes. Each output sums its taps in tap order, as the
 * per-plane loops do, whatever the thread count. */
typedef struct bg__conv_cl {
    const bg_conv2d_params *p;
    const float *X, *Wt;
    const bg_epilogue *ep;
    float *Y;
    int64_t blocks; /* 8-channel blocks an image */
} bg__conv_cl;

/* Outputs a step takes at most: one accumulator each, to cover the FMA latency (4 cycles x
 * 2 ports); with 128-bit registers a bg_v8f takes two, and 4 fill the 16 of SSE. */
#if BG_NATIVE_V8
#define BG__DW_CL_STEP 8
#else
#define BG__DW_CL_STEP 4
#endif

/* `n` outputs (1..BG__DW_CL_STEP) of row oh from column ow: taps summed in order, then the
 * epilogue. */
__attribute__((always_inline)) static inline void
bg__dw_cl_outputs(const bg_conv2d_params *p, const float *xp, int64_t wc, const bg_v8f *wt,
                  const bg_v8f *scale, const bg_v8f *bias, const bg_epilogue *ep, int64_t oh,
                  int64_t ow, int n, float *yt)
{
    bg_v8f acc[BG__DW_CL_STEP];
    for (int j = 0; j < n; ++j) acc[j] = BG_SPLAT8(0.0f);
    const int64_t step = 8 * p->stride_w;
    for (int64_t kh = 0; kh < p->KH; ++kh) {
        const float *row = xp + ((oh * p->stride_h + kh * p->dil_h) * wc + ow * p->stride_w) * 8;
        for (int64_t kw = 0; kw < p->KW; ++kw) {
            const float *x = row + kw * p->dil_w * 8;
            const bg_v8f w = wt[kh * p->KW + kw];
            for (int j = 0; j < n; ++j) {
                bg_v8f xv;
                BG_LOAD8(xv, x + j * step);
                acc[j] = BG_FMA8(w, xv, acc[j]);
            }
        }
    }
    for (int j = 0; j < n; ++j) {
        bg_v8f a = acc[j];
        if (ep) { /* bg__epilogue_row's operations, in its order */
            if (ep->scale) a *= *scale;
            a += *bias;
            bg__act8(&a, ep);
        }
        BG_STORE8(yt + (oh * p->OW + ow + j) * 8, a);
    }
}

/* Channels x[0..lanes) (planes H*W apart) into the padded channels-last block: pixel (ih,
 * iw) at ((ih + pad_top) * wc + iw + pad_left) * 8. Eight whole channels go 8 pixels at a
 * time through a register transpose; the rest one float at a time. */
static void bg__dw_cl_gather(const bg_conv2d_params *p, const float *x, int lanes, int64_t wc,
                             float *xp)
{
    const int64_t HW = p->H * p->W;
    int64_t i = 0, ih = 0, iw = 0; /* pixel i is (ih, iw) */
    float *row = xp + (p->pad_top * wc + p->pad_left) * 8; /* where row ih's pixels go */
#ifdef BG_HAVE_SHUFFLEVECTOR
    if (lanes == 8) {
        float pixels[64];
        for (; i + 8 <= HW; i += 8) {
            bg__transpose8x8(x + i, HW, pixels, 8);
            for (int j = 0; j < 8; ++j) {
                memcpy(row + 8 * iw, pixels + 8 * j, 8 * sizeof(float));
                if (++iw == p->W) iw = 0, ++ih, row += 8 * wc;
            }
        }
    }
#endif
    for (; i < HW; ++i) {
        for (int l = 0; l < lanes; ++l) row[8 * iw + l] = x[l * HW + i];
        if (++iw == p->W) iw = 0, ++ih, row += 8 * wc;
    }
}

/* The results (pixel-major, 8 channels a pixel) back into planes y[0..lanes), OHW apart. */
static void bg__dw_cl_scatter(const float *yt, int64_t OHW, int lanes, float *y)
{
    int64_t i = 0;
#ifdef BG_HAVE_SHUFFLEVECTOR
    if (lanes == 8)
        for (; i + 8 <= OHW; i += 8) bg__transpose8x8(yt + 8 * i, 8, y + i, OHW);
#endif
    for (; i < OHW; ++i)
        for (int l = 0; l < lanes; ++l) y[l * OHW + i] = yt[8 * i + l];
}

static void bg__conv2d_direct_cl_task(const void *ctx, int64_t task, void *workspace)
{
    const bg__conv_cl *t = (const bg__conv_cl *)ctx;
    const bg_conv2d_params *p = t->p;
    const int64_t n = task / t->blocks, c0 = task % t->blocks * 8;
    const int lanes = (int)bg__min64(8, p->C - c0);
    const int64_t HW = p->H * p->W, KK = p->KH * p->KW;
    int64_t hc, wc;
    bg__conv_cl_block(p, &hc, &wc);
    float *const xp = bg__align64(workspace), *const yt = xp + 8 * hc * wc;
    memset(xp, 0, (size_t)(8 * hc * wc) * sizeof(float));
    bg__dw_cl_gather(p, t->X + (n * p->C + c0) * HW, lanes, wc, xp);
    bg_v8f wt[BG__DW_CL_MAX_TAPS], scale = BG_SPLAT8(1.0f), bias = BG_SPLAT8(0.0f);
    float lane[8];
    for (int64_t k = 0; k < KK; ++k) {
        for (int l = 0; l < 8; ++l) lane[l] = l < lanes ? t->Wt[(c0 + l) * KK + k] : 0.0f;
        BG_LOAD8(wt[k], lane);
    }
    const bg_epilogue *ep = bg__epilogue_active(t->ep) ? t->ep : NULL;
    if (ep && ep->scale) {
        for (int l = 0; l < 8; ++l) lane[l] = l < lanes ? ep->scale[c0 + l] : 1.0f;
        BG_LOAD8(scale, lane);
    }
    if (ep && ep->bias) {
        for (int l = 0; l < 8; ++l) lane[l] = l < lanes ? ep->bias[c0 + l] : 0.0f;
        BG_LOAD8(bias, lane);
    }
    /* A row in equal steps (14 = 7 + 7, not 4 + 4 + 4 + 2): a short step would load every
     * tap's weights again for a few outputs. At x86-64-v4 (-O3, alternated), 256 channels of
     * 5x5 at 14x14 (PP-LCNet's) in steps of 4 took 91-93 us, of 7 76-77 us; 512 at 7x7
     * 65-67 -> 40-50 us. */
    const int64_t steps = (p->OW + BG__DW_CL_STEP - 1) / BG__DW_CL_STEP;
    const int step = (int)((p->OW + steps - 1) / steps);
    for (int64_t oh = 0; oh < p->OH; ++oh) {
        int64_t ow = 0;
        switch (step) { /* each step width compiled with its accumulators in registers */
#define BG__DW_CL_ROW(N)                                                                           \
    case N:                                                                                        \
        for (; ow + N <= p->OW; ow += N)                                                           \
            bg__dw_cl_outputs(p, xp, wc, wt, &scale, &bias, ep, oh, ow, N, yt);                    \
        break;
            BG__DW_CL_ROW(1)
            BG__DW_CL_ROW(2)
            BG__DW_CL_ROW(3)
            BG__DW_CL_ROW(4)
#if BG__DW_CL_STEP > 4
            BG__DW_CL_ROW(5)
            BG__DW_CL_ROW(6)
            BG__DW_CL_ROW(7)
            BG__DW_CL_ROW(8)
#endif
#undef BG__DW_CL_ROW
        default:
            break;
        }
        if (ow < p->OW)
            bg__dw_cl_outputs(p, xp, wc, wt, &scale, &bias, ep, oh, ow, (int)(p->OW - ow), yt);
    }
    bg__dw_cl_scatter(yt, p->OH * p->OW, lanes, t->Y + (n * p->M + c0) * p->OH * p->OW);
}

static void bg__conv2d_direct(const bg_conv2d_params *p, const float *X, const float *Wt,
                              const bg_epilogue *ep, float *Y, void *workspace, bg_threadpool *pool)
{
    const int small = p->M * p->OH * p->OW * p->KH * p->KW < BG_GEMM_PARALLEL_MIN_MACS;
    if (small) pool = NULL;
    if (bg__conv_direct_cl(p)) {
        const int64_t blocks = (p->C + 7) / 8;
        const bg__conv_cl d = {p, X, Wt, ep, Y, blocks};
        bg_parallel(pool, p->N * blocks, bg__conv2d_direct_cl_task, &d, workspace);
        return;
    }
    /* Four chunks of planes a thread balance the load; one on one thread. */
    const int threads = bg_threadpool_threads(pool);
    const int64_t planes = p->N * p->C, tasks = threads > 1 ? bg__min64(planes, 4 * threads) : 1;
    const int64_t per_task = (planes + tasks - 1) / tasks;
    const bg__conv_direct d = {p, X, Wt, ep, Y, per_task};
    bg_parallel(pool, (planes + per_task - 1) / per_task, bg__conv2d_direct_task, &d, workspace);
}
