/* bg_pool.h — 2-D and 3-D max and average pooling (part of bg_kernels.h; include that
 * instead).
 *
 * 2-D pooling runs one output row at a time through bg_window.h (padding checks only at the
 * row's edges, vectorized interior); average pooling then divides by each window's tap count.
 * 3-D pooling runs as two 2-D passes (see bg_maxpool3d). 1-D pooling is 2-D with H = 1.
 */
#ifndef BG_KERNELS_H
#error "include bg_kernels.h, not bg_pool.h"
#endif
#ifndef BG_POOL_H
#define BG_POOL_H

typedef struct bg_pool2d_params {
    int64_t N, C, H, W, OH, OW, KH, KW;
    int64_t stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
    int count_include_pad; /* AveragePool only */
    /* Added to the given API: read only by AveragePool with count_include_pad, whose
     * divisor counts the window's positions inside the padded image. With ceil_mode a
     * window can overhang the bottom/right padding, and OH/OW alone do not say by how
     * much (onnxruntime does not count the overhang). */
    int64_t pad_bottom, pad_right;
} bg_pool2d_params;

/* Number of taps t in [0, k) with lo <= base + t*d < hi (d >= 1). */
static inline int64_t bg__count_taps(int64_t base, int64_t d, int64_t k, int64_t lo, int64_t hi)
{
    int64_t first = base >= lo ? 0 : (lo - base + d - 1) / d;
    int64_t last = base >= hi ? -1 : (hi - 1 - base) / d; /* inclusive */
    if (last > k - 1) last = k - 1;
    return last >= first ? last - first + 1 : 0;
}

static inline bg__window bg__pool_window(const bg_pool2d_params *p)
{
    return bg__window_make(p->H, p->W, p->OW, p->KH, p->KW, p->stride_h, p->stride_w, p->dil_h,
                           p->dil_w, p->pad_top, p->pad_left);
}

/* Planes [first, last) of a 2-D pooling (one task of bg__pool2d_run). */
typedef struct bg__pool2d_job {
    const bg_pool2d_params *p;
    const float *X;
    float *Y;
    int64_t planes_per_task;
    int average;
} bg__pool2d_job;

static void bg__maxpool2d_planes(const bg_pool2d_params *p, const float *X, float *Y,
                                 int64_t first, int64_t last)
{
    const bg__window win = bg__pool_window(p);
    for (int64_t pl = first; pl < last; ++pl) {
        const float *x = X + pl * p->H * p->W;
        float *y = Y + pl * p->OH * p->OW;
        for (int64_t oh = 0; oh < p->OH; ++oh)
            bg__window_row(&win, BG__WIN_MAX, x, NULL, oh, y + oh * p->OW);
    }
}

static void bg__avgpool2d_planes(const bg_pool2d_params *p, const float *X, float *Y,
                                 int64_t first, int64_t last)
{
    const bg__window win = bg__pool_window(p);
    /* The divisor counts taps inside the image, or inside the padded image. */
    const int64_t h_lo = p->count_include_pad ? -p->pad_top : 0;
    const int64_t h_hi = p->count_include_pad ? p->H + p->pad_bottom : p->H;
    const int64_t w_lo = p->count_include_pad ? -p->pad_left : 0;
    const int64_t w_hi = p->count_include_pad ? p->W + p->pad_right : p->W;
    for (int64_t pl = first; pl < last; ++pl) {
        const float *x = X + pl * p->H * p->W;
        float *y = Y + pl * p->OH * p->OW;
        for (int64_t oh = 0; oh < p->OH; ++oh) {
            float *yr = y + oh * p->OW;
            bg__window_row(&win, BG__WIN_SUM, x, NULL, oh, yr);
            const int64_t nh = bg__count_taps(oh * p->stride_h - p->pad_top, p->dil_h, p->KH,
                                              h_lo, h_hi);
            /* Interior windows hold all KW columns: one divisor, divided 8 lanes at a time
             * (the same correctly rounded quotients); edge columns count their own taps. */
            const float inner = (float)(nh * p->KW);
            const bg_v8f vinner = BG_SPLAT8(inner);
            int64_t ow = win.ow_a;
            for (; ow + 8 <= win.ow_b; ow += 8) {
                bg_v8f v;
                BG_LOAD8(v, yr + ow);
                v /= vinner;
                BG_STORE8(yr + ow, v);
            }
            for (; ow < win.ow_b; ++ow) yr[ow] /= inner;
            /* The edges: [0, ow_a) and [ow_b, OW) (all of the row when it has no interior). */
            const int64_t left = bg__min64(win.ow_a, p->OW);
            const int64_t ranges[2][2] = {{0, left}, {bg__max64(win.ow_b, left), p->OW}};
            for (int e = 0; e < 2; ++e)
                for (ow = ranges[e][0]; ow < ranges[e][1]; ++ow) {
                    const int64_t nw = bg__count_taps(ow * p->stride_w - p->pad_left,
                                                      p->dil_w, p->KW, w_lo, w_hi);
                    yr[ow] /= (float)(nh * nw);
                }
        }
    }
}

/* ---- Stride 1, output the input's size ("same" padding: Inception's 3x3 pools, YOLO's
 * SPPF 5x5 max pools) ----
 * Max and sum are separable: a pass along the rows of a plane (of up to 1024 floats, 32x32)
 * into a buffer on the stack, then one down its columns into Y, each a few flat loops over
 * the whole plane (a 7x7 plane is one loop of 49, not seven windows of seven with edge
 * checks each), which the compiler vectorizes; outputs whose windows cross an edge are
 * redone on their own. Measured 3-12x
 * faster than the window rows on Inception-v2's and YOLOv8's pools. The max is exactly the
 * window rows' (taps that are NaN never win, as there); the average sums the same taps in
 * another order (a rounding apart). */
#define BG__POOL_SAME_FLOATS 1024 /* a plane; 4 KiB of stack, twice */

static inline int bg__pool_same(const bg_pool2d_params *p)
{
    return p->stride_h == 1 && p->stride_w == 1 && p->dil_h == 1 && p->dil_w == 1 &&
           p->OH == p->H && p->OW == p->W && p->pad_top >= 0 && p->pad_top < p->KH &&
           p->pad_left >= 0 && p->pad_left < p->KW && p->H * p->W <= BG__POOL_SAME_FLOATS;
}

/* dst[j] = max or sum(dst[j], src[j]) for j < n. */
static inline void bg__pool_combine(float *restrict dst, const float *restrict src, int64_t n,
                                    int average)
{
    if (average)
        for (int64_t j = 0; j < n; ++j) dst[j] += src[j];
    else
        for (int64_t j = 0; j < n; ++j) dst[j] = src[j] > dst[j] ? src[j] : dst[j];
}

/* One output of a window of taps [lo, hi) of row x (lo < hi). */
static inline float bg__pool_taps(const float *x, int64_t lo, int64_t hi, int average)
{
    float acc = average ? 0.0f : -INFINITY;
    for (int64_t i = lo; i < hi; ++i) acc = average ? acc + x[i] : (x[i] > acc ? x[i] : acc);
    return acc;
}

/* out[r, w] = max or sum of x[r, w - pl .. w - pl + KW) within the row, for `rows` rows of
 * W: flat over all of them, then the columns whose windows cross a row's edge again. */
static void bg__pool_along_rows(const float *x, int64_t rows, int64_t W, int64_t KW,
                                int64_t pl, int average, float *out)
{
    const int64_t n = rows * W, pr = KW - 1 - pl;
    if (n - pr > pl) {
        /* A max starts from -inf, so that a NaN tap never wins (nor does one first); the
         * rows it leaves hold no NaN, so the pass down the columns may start from a copy. */
        if (average)
            memcpy(out + pl, x, (size_t)(n - pr - pl) * sizeof(float));
        else
            for (int64_t j = pl; j < n - pr; ++j) out[j] = -INFINITY;
        for (int64_t k = average ? 1 : 0; k < KW; ++k)
            bg__pool_combine(out + pl, x + k, n - pr - pl, average);
    }
    const int64_t left = bg__min64(pl, W), right = bg__max64(W - pr, left);
    for (int64_t r = 0; r < rows; ++r) {
        const float *xr = x + r * W;
        float *o = out + r * W;
        for (int64_t w = left > 0 ? 0 : right; w < W; w = w + 1 == left ? right : w + 1)
            o[w] = bg__pool_taps(xr, bg__max64(w - pl, 0), bg__min64(w - pl + KW, W), average);
    }
}

/* The average's divisor of each output of a "same" pooling whose plane fits the buffer:
 * the taps inside the image, or inside the padded image, the same for every plane. */
static void bg__pool_same_divisors(const bg_pool2d_params *p, float *den)
{
    const int64_t h_lo = p->count_include_pad ? -p->pad_top : 0;
    const int64_t h_hi = p->count_include_pad ? p->H + p->pad_bottom : p->H;
    const int64_t w_lo = p->count_include_pad ? -p->pad_left : 0;
    const int64_t w_hi = p->count_include_pad ? p->W + p->pad_right : p->W;
    for (int64_t oh = 0; oh < p->H; ++oh)
        for (int64_t w = 0; w < p->W; ++w)
            den[oh * p->W + w] = (float)(bg__count_taps(oh - p->pad_top, 1, p->KH, h_lo, h_hi) *
                                         bg__count_taps(w - p->pad_left, 1, p->KW, w_lo, w_hi));
}

/* One plane of a "same" pooling (bg__pool_same); den: the divisors of an average
 * (bg__pool_same_divisors), or NULL for the max. */
static void bg__pool2d_same_plane(const bg_pool2d_params *p, const float *x, float *y,
                                  const float *den)
{
    const int average = den != NULL;
    const int64_t H = p->H, W = p->W, KH = p->KH, pt = p->pad_top;
    float rows[BG__POOL_SAME_FLOATS];
    bg__pool_along_rows(x, H, W, p->KW, p->pad_left, average, rows);
    /* Output rows [a, b) have every tap row inside the image: one flat pass per tap row. */
    const int64_t a = bg__min64(pt, H), b = bg__max64(H - KH + 1 + pt, a);
    if (b > a) {
        memcpy(y + a * W, rows + (a - pt) * W, (size_t)((b - a) * W) * sizeof(float));
        for (int64_t kh = 1; kh < KH; ++kh)
            bg__pool_combine(y + a * W, rows + (a - pt + kh) * W, (b - a) * W, average);
    }
    for (int64_t oh = a > 0 ? 0 : b; oh < H; oh = oh + 1 == a ? b : oh + 1) {
        const int64_t lo = bg__max64(0, oh - pt), hi = bg__min64(H, oh - pt + KH);
        memcpy(y + oh * W, rows + lo * W, (size_t)W * sizeof(float));
        for (int64_t ih = lo + 1; ih < hi; ++ih)
            bg__pool_combine(y + oh * W, rows + ih * W, W, average);
    }
    if (average)
        for (int64_t j = 0; j < H * W; ++j) y[j] /= den[j];
}

static void bg__pool2d_task(const void *ctx, int64_t task, void *ws)
{
    (void)ws;
    const bg__pool2d_job *j = (const bg__pool2d_job *)ctx;
    const int64_t first = task * j->planes_per_task;
    const int64_t last = bg__min64(first + j->planes_per_task, j->p->N * j->p->C);
    const int64_t plane = j->p->H * j->p->W;
    float den[BG__POOL_SAME_FLOATS];
    if (bg__pool_same(j->p)) {
        if (j->average) bg__pool_same_divisors(j->p, den);
        for (int64_t pl = first; pl < last; ++pl)
            bg__pool2d_same_plane(j->p, j->X + pl * plane, j->Y + pl * plane,
                                  j->average ? den : NULL);
    } else if (j->average)
        bg__avgpool2d_planes(j->p, j->X, j->Y, first, last);
    else
        bg__maxpool2d_planes(j->p, j->X, j->Y, first, last);
}

/* Planes are independent: on a pool, blocks of them are tasks (bg_split_rows), each with
 * enough taps to pay for waking a thread. */
static void bg__pool2d_run(const bg_pool2d_params *p, const float *X, float *Y, int average,
                           bg_threadpool *pool)
{
    const int64_t planes = p->N * p->C, taps = p->OH * p->OW * p->KH * p->KW;
    const int64_t grain = BG_GEMM_PARALLEL_MIN_MACS / (taps > 0 ? taps : 1) + 1;
    const int64_t per_task = bg_split_rows(planes, grain, pool);
    const bg__pool2d_job job = {p, X, Y, per_task, average};
    bg_parallel(pool, (planes + per_task - 1) / per_task, bg__pool2d_task, &job, NULL);
}

/* pool: NULL, or the instance's threads (see bg_sgemm). */
BG_API void bg_maxpool2d(const bg_pool2d_params *p, const float *X, float *Y,
                         bg_threadpool *pool)
{
    bg__pool2d_run(p, X, Y, 0, pool);
}

BG_API void bg_avgpool2d(const bg_pool2d_params *p, const float *X, float *Y,
                         bg_threadpool *pool)
{
    bg__pool2d_run(p, X, Y, 1, pool);
}

/* A 3-D window is the product of a 2-D (H, W) window and a 1-D window along D, and both
 * max and sum factor over such a product, as does the average's divisor (the taps counted
 * along each axis multiply). So 3-D pooling is two passes of the 2-D kernels above:
 *   1. (H, W) over every input depth slice: X [N*C*D planes of H x W] -> T [.., OH x OW];
 *   2. D with a KD x 1 window: T read as N*C planes of D rows of OH*OW columns -> Y.
 * Pass 2 has KW = 1 and stride 1 along its rows, the vectorized interior's best case.
 * Average pooling divides in each pass by that pass's tap count. T lives in the workspace. */
typedef struct bg_pool3d_params {
    int64_t N, C, D, H, W, OD, OH, OW, KD, KH, KW;
    int64_t stride_d, stride_h, stride_w, dil_d, dil_h, dil_w;
    int64_t pad_front, pad_top, pad_left, pad_back, pad_bottom, pad_right;
    int count_include_pad; /* AveragePool only */
} bg_pool3d_params;

static inline size_t bg_pool3d_workspace_bytes(const bg_pool3d_params *p)
{
    return (size_t)(p->N * p->C * p->D * p->OH * p->OW) * sizeof(float);
}

static inline void bg__pool3d_passes(const bg_pool3d_params *p, bg_pool2d_params *hw,
                                     bg_pool2d_params *d)
{
    const bg_pool2d_params first = {
        .N = p->N * p->C * p->D, .C = 1, .H = p->H, .W = p->W, .OH = p->OH, .OW = p->OW,
        .KH = p->KH, .KW = p->KW, .stride_h = p->stride_h, .stride_w = p->stride_w,
        .dil_h = p->dil_h, .dil_w = p->dil_w, .pad_top = p->pad_top, .pad_left = p->pad_left,
        .count_include_pad = p->count_include_pad, .pad_bottom = p->pad_bottom,
        .pad_right = p->pad_right};
    const bg_pool2d_params second = {
        .N = p->N * p->C, .C = 1, .H = p->D, .W = p->OH * p->OW, .OH = p->OD,
        .OW = p->OH * p->OW, .KH = p->KD, .KW = 1, .stride_h = p->stride_d, .stride_w = 1,
        .dil_h = p->dil_d, .dil_w = 1, .pad_top = p->pad_front, .pad_left = 0,
        .count_include_pad = p->count_include_pad, .pad_bottom = p->pad_back, .pad_right = 0};
    *hw = first;
    *d = second;
}

/* ws: bg_pool3d_workspace_bytes(p) bytes. */
BG_API void bg_maxpool3d(const bg_pool3d_params *p, const float *X, float *Y, void *ws)
{
    bg_pool2d_params hw, d;
    bg__pool3d_passes(p, &hw, &d);
    bg_maxpool2d(&hw, X, (float *)ws, NULL);
    bg_maxpool2d(&d, (const float *)ws, Y, NULL);
}

BG_API void bg_avgpool3d(const bg_pool3d_params *p, const float *X, float *Y, void *ws)
{
    bg_pool2d_params hw, d;
    bg__pool3d_passes(p, &hw, &d);
    bg_avgpool2d(&hw, X, (float *)ws, NULL);
    bg_avgpool2d(&d, (const float *)ws, Y, NULL);
}

#endif /* BG_POOL_H */
