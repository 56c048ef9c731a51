/* bg_conv_pixel.h — the pixel form: a few input channels into a few filters
 * (part of bg_conv.h, through bg_kernels.h; include that instead). */
#ifndef BG_CONV_H
#error "include bg_kernels.h, not bg_conv_pixel.h"
#endif

/* ---- The pixel form: a few input channels into a few filters (a network's stem) ----
 * With 3 input channels a GEMM's K is 27 (3x3) to 147 (7x7): packing im2col (or the
 * shifted form's phase planes) costs as much as the multiply-adds. Here each output pixel's
 * filters are vectors (M rounded up to 8, filters packed [K][M] at create): a tap is one
 * input value broadcast into MV filter vectors for P pixels at once, read in place, the
 * image's edges by bounds checks on the blocks that cross them. A row of results
 * (pixel-major) goes into Y through 8x8 transposes. Each output sums its taps in (c, kh, kw)
 * order, skipping those in the padding, on any number of threads: the same bits at either
 * vector width. */
/* Filters [M][C*KH*KW] -> [C*KH*KW][M rounded up to BG__PIX_VW], zero filters past M. */
static void bg__conv_pixel_pack(const bg_conv2d_params *p, const float *Wt, float *dst)
{
    const int64_t K = p->C * p->KH * p->KW, Mp = bg__round_up(p->M, BG__PIX_VW);
    for (int64_t k = 0; k < K; ++k)
        for (int64_t m = 0; m < Mp; ++m) dst[k * Mp + m] = m < p->M ? Wt[m * K + k] : 0.0f;
}

/* The epilogue's activation on one filter vector (bg__act8's, on each 8 lanes). */
static inline void bg__pixel_act(bg__pixv *v, const bg_epilogue *ep)
{
#if BG__PIX_VW == 16 && defined(BG_HAVE_SHUFFLEVECTOR)
    /* In registers: halves through memory were stored in two and read back in one (a
     * store-forwarding stall at every result). */
    bg_v8f lo = BG__SHUF(*v, *v, 0, 1, 2, 3, 4, 5, 6, 7);
    bg_v8f hi = BG__SHUF(*v, *v, 8, 9, 10, 11, 12, 13, 14, 15);
    bg__act8(&lo, ep);
    bg__act8(&hi, ep);
    *v = BG__SHUF(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#elif BG__PIX_VW == 16
    bg_v8f half[2];
    memcpy(half, v, sizeof half);
    bg__act8(&half[0], ep);
    bg__act8(&half[1], ep);
    memcpy(v, half, sizeof half);
#else
    bg__act8(v, ep);
#endif
}

/* P pixels from (oh, ow) x MV filter vectors: acc, then the epilogue, into tile[j][Mp]. */
__attribute__((always_inline)) static inline void
bg__conv_pixel_tile(const bg_conv2d_params *p, const float *x, const float *wp, int64_t oh,
                    int64_t ow, int MV, int P, int edge, const bg_epilogue *ep,
                    const bg__pixv *affine, float *tile)
{
    const int64_t Mp = BG__PIX_VW * MV, sh = p->stride_h, sw = p->stride_w;
    bg__pixv acc[4][12];
    for (int v = 0; v < MV; ++v)
        for (int j = 0; j < P; ++j) acc[v][j] = BG__PIX_SPLAT(0.0f);
    for (int64_t c = 0; c < p->C; ++c)
        for (int64_t kh = 0; kh < p->KH; ++kh) {
            const int64_t ih = oh * sh - p->pad_top + kh * p->dil_h;
            if (ih < 0 || ih >= p->H) continue;
            const float *xr = x + (c * p->H + ih) * p->W;
            const float *wk = wp + (c * p->KH + kh) * p->KW * Mp;
            for (int64_t kw = 0; kw < p->KW; ++kw, wk += Mp) {
                bg__pixv w[4];
                for (int v = 0; v < MV; ++v) w[v] = BG__PIX_GET(wk + BG__PIX_VW * v);
                const int64_t iw0 = ow * sw - p->pad_left + kw * p->dil_w;
                for (int j = 0; j < P; ++j) {
                    const int64_t iw = iw0 + j * sw;
                    if (edge && (iw < 0 || iw >= p->W)) continue;
                    const bg__pixv xv = BG__PIX_SPLAT(xr[iw]);
                    for (int v = 0; v < MV; ++v) acc[v][j] = BG__PIX_FMA(w[v], xv, acc[v][j]);
                }
            }
        }
    for (int v = 0; v < MV; ++v)
        for (int j = 0; j < P; ++j) {
            bg__pixv a = acc[v][j];
            if (ep) { /* bg__epilogue_row's operations, in its order */
                if (ep->scale) a *= affine[2 * v];
                a += affine[2 * v + 1];
                bg__pixel_act(&a, ep);
            }
            BG__PIX_STORE(tile + j * Mp + BG__PIX_VW * v, a);
        }
}

/* Output pixels [ow0, ow1) of row oh into tile, P at a time;
 * a last P ending at ow1 overlaps the one before (recomputing a few pixels, the same bits)
 * rather than running pixel by pixel. */
#define BG__CONV_PIXEL_ROWS(MV, P)                                                                 \
    __attribute__((noinline)) static void bg__conv_pixel_row_##MV(                                 \
        const bg_conv2d_params *p, const float *x, const float *wp, int64_t oh, int64_t ow0,      \
        int64_t ow1, int64_t lo, int64_t hi, const bg_epilogue *ep, const bg__pixv *affine,       \
        float *tile)                                                                               \
    {                                                                                              \
        int64_t ow = ow0;                                                                          \
        for (int last = 0; !last && ow1 - ow0 >= (P); ow += (P)) {                                 \
            if (ow + (P) >= ow1) ow = ow1 - (P), last = 1;                                         \
            if (ow >= lo && ow + (P) <= hi)                                                        \
                bg__conv_pixel_tile(p, x, wp, oh, ow, MV, P, 0, ep, affine,                        \
                                    tile + (ow - ow0) * BG__PIX_VW * (MV));                        \
            else                                                                                   \
                bg__conv_pixel_tile(p, x, wp, oh, ow, MV, P, 1, ep, affine,                        \
                                    tile + (ow - ow0) * BG__PIX_VW * (MV));                        \
        }                                                                                          \
        for (; ow < ow1; ++ow)                                                                     \
            bg__conv_pixel_tile(p, x, wp, oh, ow, MV, 1, 1, ep, affine,                            \
                                tile + (ow - ow0) * BG__PIX_VW * (MV));                            \
    }
/* Accumulators: 24 of the 32 registers at 16 lanes, 12 of the 16 at 8 (with the filter
 * vectors and a broadcast beside them). */
#if BG__PIX_VW == 16
BG__CONV_PIXEL_ROWS(1, 12)
BG__CONV_PIXEL_ROWS(2, 12)
BG__CONV_PIXEL_ROWS(3, 8)
BG__CONV_PIXEL_ROWS(4, 6)
#else
BG__CONV_PIXEL_ROWS(1, 6)
BG__CONV_PIXEL_ROWS(2, 6)
BG__CONV_PIXEL_ROWS(3, 4)
BG__CONV_PIXEL_ROWS(4, 3)
#endif
#undef BG__CONV_PIXEL_ROWS
typedef void (*bg__conv_pixel_row_fn)(const bg_conv2d_params *, const float *, const float *,
                                      int64_t, int64_t, int64_t, int64_t, int64_t,
                                      const bg_epilogue *, const bg__pixv *, float *);

typedef struct bg__conv_pixel {
    const bg_conv2d_params *p;
    const float *X, *wp;
    const bg_epilogue *ep;
    float *Y;
    int64_t rows; /* output rows a task */
} bg__conv_pixel;

static void bg__conv_pixel_task(const void *ctx, int64_t task, void *workspace)
{
    const bg__conv_pixel *t = (const bg__conv_pixel *)ctx;
    const bg_conv2d_params *p = t->p;
    const int64_t bands = (p->OH + t->rows - 1) / t->rows, n = task / bands;
    const int64_t oh0 = task % bands * t->rows, oh1 = bg__min64(oh0 + t->rows, p->OH);
    const int64_t MV = (p->M + BG__PIX_VW - 1) / BG__PIX_VW, Mp = BG__PIX_VW * MV;
    const int64_t OHW = p->OH * p->OW;
    const float *x = t->X + n * p->C * p->H * p->W;
    const bg_epilogue *ep = bg__epilogue_active(t->ep) ? t->ep : NULL;
    float *const tile = bg__align64(workspace);
    /* Each filter vector's scale and bias (1 and 0 past M: those results are never read). */
    bg__pixv affine[2 * (BG__CONV_PIXEL_MAX_M / BG__PIX_VW)];
    for (int64_t v = 0; v < MV; ++v) {
        float scale[BG__PIX_VW], bias[BG__PIX_VW];
        for (int64_t l = 0; l < BG__PIX_VW; ++l) {
            const int64_t m = BG__PIX_VW * v + l;
            scale[l] = m < p->M && ep && ep->scale ? ep->scale[m] : 1.0f;
            bias[l] = m < p->M && ep && ep->bias ? ep->bias[m] : 0.0f;
        }
        BG__PIX_LOAD(affine[2 * v], scale);
        BG__PIX_LOAD(affine[2 * v + 1], bias);
    }
    /* Pixels [lo, hi) of a row have every tap inside the image's columns. */
    int64_t lo, hi, lo_last, hi_last;
    bg__valid_range(-p->pad_left, p->stride_w, p->W, p->OW, &lo, &hi);
    bg__valid_range(-p->pad_left + (p->KW - 1) * p->dil_w, p->stride_w, p->W, p->OW, &lo_last,
                    &hi_last);
    lo = bg__max64(lo, lo_last);
    hi = bg__min64(hi, hi_last);
    /* The tile holds whole output rows (segments of a row wider than the tile), so that its
     * pixels are one run of each output plane: each plane is then written BG__CONV_PIXEL_TILE
     * values at a time, not a row's 64 (with 64 filters, 64 short runs at once defeated the
     * cache's stream prefetch: the copy-out took as long as the multiply-adds). */
    const bg__conv_pixel_row_fn row = MV == 1   ? bg__conv_pixel_row_1
                                      : MV == 2 ? bg__conv_pixel_row_2
                                      : MV == 3 ? bg__conv_pixel_row_3
                                                : bg__conv_pixel_row_4;
    const int64_t OW = p->OW, seg = bg__min64(OW, BG__CONV_PIXEL_TILE);
    const int64_t rows_per_tile = OW <= BG__CONV_PIXEL_TILE ? BG__CONV_PIXEL_TILE / OW : 1;
    for (int64_t oh = oh0; oh < oh1; oh += rows_per_tile)
        for (int64_t ow0 = 0; ow0 < OW; ow0 += seg) {
            const int64_t ow1 = bg__min64(ow0 + seg, OW);
            const int64_t rows = bg__min64(rows_per_tile, oh1 - oh);
            for (int64_t r = 0; r < rows; ++r)
                row(p, x, t->wp, oh + r, ow0, ow1, lo, hi, ep, affine,
                    tile + r * (ow1 - ow0) * Mp);
            /* tile[pixel][Mp] -> Y[m][oh][ow0 + pixel], pixels running on into later rows */
            float *y = t->Y + n * p->M * OHW + oh * OW + ow0;
            const int64_t count = rows * (ow1 - ow0);
            for (int64_t m0 = 0; m0 < p->M; m0 += 8) {
                const int64_t lanes = bg__min64(8, p->M - m0);
                int64_t i = 0;
#ifdef BG_HAVE_SHUFFLEVECTOR
                if (lanes == 8)
                    for (; i + 8 <= count; i += 8)
                        bg__transpose8x8(tile + i * Mp + m0, Mp, y + m0 * OHW + i, OHW);
#endif
                for (; i < count; ++i)
                    for (int64_t l = 0; l < lanes; ++l)
                        y[(m0 + l) * OHW + i] = tile[i * Mp + m0 + l];
            }
        }
}

static void bg__conv2d_pixel(const bg_conv2d_params *p, const float *X, const float *wp,
                             const bg_epilogue *ep, float *Y, void *workspace, bg_threadpool *pool)
{
    const int threads = bg_threadpool_threads(pool);
    const int64_t tasks_wanted = threads > 1 ? 8 * threads : 1;
    const int64_t rows = bg__max64(1, p->N * p->OH / tasks_wanted);
    const bg__conv_pixel t = {p, X, wp, ep, Y, bg__min64(rows, p->OH)};
    const int64_t bands = (p->OH + t.rows - 1) / t.rows;
    bg_parallel(pool, p->N * bands, bg__conv_pixel_task, &t, workspace);
}
