/* bg_conv_gemm.h — the GEMM forms: packed (implicit im2col), shifted and transposed
 * (part of bg_conv.h, through bg_kernels.h; include that instead). */
#ifndef BG_CONV_H
#error "include bg_kernels.h, not bg_conv_gemm.h"
#endif

/* row[0:len) = im2col row (kh, kw) of plane xc for output columns starting at (oh, ow):
 * per output row, zeros where the tap falls in the padding and a copy in between. */
static inline void bg__im2col_row(const bg_conv2d_params *p, const float *xc, int64_t kh,
                                  int64_t kw, int64_t oh, int64_t ow, int64_t len, float *row)
{
    const int64_t OW = p->OW, sw = p->stride_w;
    const int64_t ih_off = kh * p->dil_h - p->pad_top, iw_off = kw * p->dil_w - p->pad_left;
    int64_t lo, hi;
    bg__valid_range(iw_off, sw, p->W, OW, &lo, &hi);
    for (int64_t j = 0; j < len; ++oh, ow = 0) {
        const int64_t run = OW - ow < len - j ? OW - ow : len - j;
        float *r = row + j; /* r[o - ow] is output column o of this output row */
        const int64_t end = ow + run, ih = oh * p->stride_h + ih_off;
        j += run;
        if (ih < 0 || ih >= p->H) {
            for (int64_t o = ow; o < end; ++o) r[o - ow] = 0.0f;
            continue;
        }
        const int64_t a = lo < ow ? ow : (lo < end ? lo : end);
        const int64_t b = hi > end ? end : (hi > a ? hi : a);
        int64_t o = ow;
        for (; o < a; ++o) r[o - ow] = 0.0f;
        if (a < b) {
            /* Input of output column o in [a, b): src[(o - a) * sw], inside the image row. */
            const float *src = xc + ih * p->W + iw_off + a * sw;
            if (sw == 1) {
                bg_v8f v;
                for (; o + 8 <= b; o += 8) {
                    BG_LOAD8(v, src + (o - a));
                    BG_STORE8(r + (o - ow), v);
                }
                if (o < b && b - a >= 8) { /* the tail: one copy ending at b, overlapping */
                    BG_LOAD8(v, src + (b - 8 - a));
                    BG_STORE8(r + (b - 8 - ow), v);
                    o = b;
                }
            }
            for (; o < b; ++o) r[o - ow] = src[(o - a) * sw];
        }
        for (; o < end; ++o) r[o - ow] = 0.0f;
    }
}

/* dst[0:n) = src[0], src[sw], ... */
static inline void bg__copy_strided(const float *src, int64_t sw, int64_t n, float *dst)
{
    int64_t t = 0;
    if (sw == 1) {
        bg_v8f v;
        for (; t + 8 <= n; t += 8) {
            BG_LOAD8(v, src + t);
            BG_STORE8(dst + t, v);
        }
        if (t < n && n >= 8) { /* the tail: one copy ending at n, overlapping */
            BG_LOAD8(v, src + n - 8);
            BG_STORE8(dst + n - 8, v);
            return;
        }
    }
#ifdef BG_HAVE_SHUFFLEVECTOR
    if (sw == 2) /* even lanes of two loads; the second's last lane is past src[2(n-1)]: */
        for (; t + 9 <= n; t += 8) { /* stop a vector early, reading nothing beyond it */
            bg_v8f a, b;
            BG_LOAD8(a, src + 2 * t);
            BG_LOAD8(b, src + 2 * t + 8);
            const bg_v8f v = __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
            BG_STORE8(dst + t, v);
        }
#endif
    for (; t < n; ++t) dst[t] = src[t * sw];
}

/* B packer over the im2col view of one image-group (s->data points at its first channel)
 * whose windows all lie inside the image: the GEMM form reads a padded copy where they
 * would not (bg__conv_im2col_padded). Row k = (c, kh, kw), column j = (oh, ow): each output
 * row's run of columns is copied straight into the NR-wide micro-panels, cut where a panel
 * ends. (Built in a row first and copied out in wider loads, it stalled on store
 * forwarding, and per-run bounds checks were most of the work on small images.) */
static inline void bg__pack_b_im2col(const bg__bsrc *s, int64_t k0, int64_t kc, int64_t j0,
                                     int64_t nc, float *dst)
{
    const bg_conv2d_params *p = (const bg_conv2d_params *)s->ctx;
    const int64_t NR = BG_GEMM_NR, KHW = p->KH * p->KW, OW = p->OW, sw = p->stride_w;
    const int64_t n_pad = bg__round_up(nc, NR), row_step = p->stride_h * p->W;
    for (int64_t k = 0; k < kc; ++k) {
        const int64_t c = (k0 + k) / KHW, r = (k0 + k) % KHW;
        const float *xk =
            s->data + c * p->H * p->W + r / p->KW * p->dil_h * p->W + r % p->KW * p->dil_w;
        float *const dk = dst + k * NR; /* row k of the first panel; panels kc * NR apart */
        int64_t oh = j0 / OW, ow = j0 % OW;
        for (int64_t j = 0; j < nc; ++oh, ow = 0) {
            const int64_t run = bg__min64(OW - ow, nc - j);
            const float *src = xk + oh * row_step + ow * sw;
            for (int64_t e = 0; e < run;) {
                const int64_t col = j + e, piece = bg__min64(run - e, NR - col % NR);
                bg__copy_strided(src + e * sw, sw, piece, dk + col / NR * kc * NR + col % NR);
                e += piece;
            }
            j += run;
        }
        for (int64_t j = nc; j < n_pad; ++j) dk[j / NR * kc * NR + j % NR] = 0.0f;
    }
}

/* dst[hp, wp] = plane x[H, W] shifted by (pad_top, pad_left), zeros around it. */
static inline void bg__pad_plane(const bg_conv2d_params *p, const float *x, int64_t hp,
                                 int64_t wp, float *dst)
{
    const int64_t pl = p->pad_left < wp ? p->pad_left : wp;
    const int64_t copy = p->W < wp - pl ? p->W : wp - pl;
    for (int64_t r = 0; r < hp; ++r) {
        float *d = dst + r * wp;
        const int64_t ih = r - p->pad_top;
        if (ih < 0 || ih >= p->H) {
            for (int64_t c = 0; c < wp; ++c) d[c] = 0.0f;
            continue;
        }
        /* Rows are short and pads tiny: plain loops beat libc calls here. */
        const float *src = x + ih * p->W;
        int64_t c = 0;
        for (; c < pl; ++c) d[c] = 0.0f;
        for (; c + 8 <= pl + copy; c += 8) {
            bg_v8f v;
            BG_LOAD8(v, src + c - pl);
            BG_STORE8(d + c, v);
        }
        for (; c < pl + copy; ++c) d[c] = src[c - pl];
        for (; c < wp; ++c) d[c] = 0.0f;
    }
}

/* The s x s phase planes of one zero-padded input plane x (bg__conv_shift): phase (ph, pw)
 * at dst + (ph * sw + pw) * hq * wq holds padded rows i*sh + ph, columns j*sw + pw. */
static void bg__phase_planes(const bg_conv2d_params *p, const float *x, const bg__conv_shift *s,
                             float *dst)
{
    const int64_t sh = p->stride_h, sw = p->stride_w;
    for (int64_t ph = 0; ph < sh; ++ph)
        for (int64_t pw = 0; pw < sw; ++pw)
            for (int64_t i = 0; i < s->hq; ++i, dst += s->wq) {
                const int64_t ih = i * sh + ph - p->pad_top;
                if (ih < 0 || ih >= p->H || i * sh + ph >= s->hp) {
                    for (int64_t j = 0; j < s->wq; ++j) dst[j] = 0.0f;
                    continue;
                }
                /* Columns [lo, hi) read the image row (a strided copy, which vectorises);
                 * the rest is padding. */
                int64_t lo, hi;
                bg__valid_range(pw - p->pad_left, sw, p->W, (s->wp - pw + sw - 1) / sw, &lo, &hi);
                const float *row = x + ih * p->W + pw - p->pad_left;
                int64_t j = 0;
                for (; j < lo; ++j) dst[j] = 0.0f;
                for (; j < hi; ++j) dst[j] = row[j * sw];
                for (; j < s->wq; ++j) dst[j] = 0.0f;
            }
}

/* The shifted form's copies, in chunks the pool's threads share: input channels into the
 * padded (or phase) planes, and a band's output rows of output channels from the product.
 * Copies do no arithmetic, so sharing them changes no bit; run on the caller alone, they
 * were what the second thread waited out on small layers. */
typedef struct bg__shift_copy {
    const bg_conv2d_params *p;
    const bg__conv_shift *s;
    const float *xg;
    float *image;
    const float *product;
    float *yg;
    int64_t n, oh0, band; /* the band being copied out: product columns, first row, rows */
    int64_t per_task;     /* channels a task */
} bg__shift_copy;

/* A task copies at least this many floats: fewer would not pay for waking a thread. */
#define BG__COPY_MIN_FLOATS (16 * 1024)

/* Channels a copy task takes, of `items` channels of `floats_each` floats (bg_split_rows). */
static inline int64_t bg__copy_per_task(int64_t items, int64_t floats_each,
                                        const bg_threadpool *pool)
{
    return bg_split_rows(items, BG__COPY_MIN_FLOATS / (floats_each > 0 ? floats_each : 1) + 1,
                         pool);
}

static void bg__shift_pad_task(const void *ctx, int64_t task, void *ws)
{
    (void)ws;
    const bg__shift_copy *t = (const bg__shift_copy *)ctx;
    const bg_conv2d_params *p = t->p;
    const bg__conv_shift *s = t->s;
    const int64_t sh = p->stride_h, sw = p->stride_w, plane = s->hq * s->wq;
    const int64_t last = bg__min64((task + 1) * t->per_task, p->C / p->group);
    for (int64_t c = task * t->per_task; c < last; ++c) {
        const float *x = t->xg + c * p->H * p->W;
        if (sh == 1 && sw == 1)
            bg__pad_plane(p, x, s->hp, s->wp, t->image + c * plane);
        else
            bg__phase_planes(p, x, s, t->image + c * sh * sw * plane);
    }
}

static void bg__shift_out_task(const void *ctx, int64_t task, void *ws)
{
    (void)ws;
    const bg__shift_copy *t = (const bg__shift_copy *)ctx;
    const int64_t OH = t->p->OH, OW = t->p->OW, wq = t->s->wq;
    const int64_t last = bg__min64((task + 1) * t->per_task, t->p->M / t->p->group);
    for (int64_t m = task * t->per_task; m < last; ++m)
        for (int64_t oh = 0; oh < t->band; ++oh)
            memcpy(t->yg + (m * OH + t->oh0 + oh) * OW, t->product + m * t->n + oh * wq,
                   (size_t)OW * sizeof(float));
}

/* One image-group of the shifted form (bg__conv_shift); pg: its packed filters, epg: its
 * epilogue (per row), ws: workspace of bg__conv_shift_floats. */
static void bg__conv2d_shifted(const bg_conv2d_params *p, const bg__conv_shift *s,
                               const float *xg, const float *pg, const bg_epilogue *epg,
                               float *yg, float *ws, bg_threadpool *pool)
{
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group, KHW = p->KH * p->KW;
    const int64_t sh = p->stride_h, sw = p->stride_w, plane = s->hq * s->wq;
    const int64_t OH = p->OH, OW = p->OW;
    float *const image = ws, *const product = ws + s->image;
    int64_t *const rows = (int64_t *)(product + s->product);
    bg__shift_copy copy = {p, s, xg, image, product, yg, 0, 0, 0, 0};
    copy.per_task = bg__copy_per_task(Cg, sh * sw * plane, pool);
    bg_parallel(pool, (Cg + copy.per_task - 1) / copy.per_task, bg__shift_pad_task, &copy,
                NULL);
    for (int64_t i = Cg * sh * sw * plane; i < s->image; ++i) image[i] = 0.0f;
    /* Row k = (c, kh, kw) of the im2col matrix starts at channel c's planes plus the tap's
     * offset: the taps' offsets once, then one add a row (a division a row cost up to a
     * tenth of a small layer's time). */
    for (int64_t t = 0; t < KHW; ++t) {
        const int64_t ih = t / p->KW * p->dil_h, iw = t % p->KW * p->dil_w;
        rows[t] = (ih % sh * sw + iw % sw) * plane + ih / sh * s->wq + iw / sw;
    }
    for (int64_t k = KHW; k < Cg * KHW; ++k) rows[k] = rows[k - KHW] + sh * sw * plane;
    for (int64_t oh0 = 0; oh0 < OH; oh0 += s->band_rows) {
        const int64_t band = bg__min64(s->band_rows, OH - oh0);
        const int64_t n = bg__conv_band_columns(p, s, band);
        const bg__bsrc src = {NULL, image + oh0 * s->wq, 0, 0, NULL, rows, 0,
                              s->aligned ? OW : 0, s->wq};
        float *const out = s->aligned ? yg + oh0 * OW : product;
        const bg__gemm gemm = {Mg, n, Cg * KHW, 1.0f, 0.0f, 0, NULL, 0, pg, &src,
                               out, s->aligned ? OH * OW : n, epg};
        /* Nothing is packed, so the GEMM's own workspace goes unused (the image is not it). */
        bg__gemm_run(&gemm, image, pool);
        if (s->aligned) continue;
        copy.n = n, copy.oh0 = oh0, copy.band = band;
        copy.per_task = bg__copy_per_task(Mg, band * OW, pool);
        bg_parallel(pool, (Mg + copy.per_task - 1) / copy.per_task, bg__shift_out_task, &copy,
                    NULL);
    }
}

/* The transposed form's copies, in chunks the pool's threads share (as the shifted form's):
 * rows of the im2col matrix, and 16-row blocks of Y from Y^T. */
typedef struct bg__transposed_copy {
    const bg_conv2d_params *p;
    const float *xg;
    float *cols;
    const float *yt;
    float *yg;
    int64_t per_task; /* im2col rows, or 16-row blocks of Y, a task */
} bg__transposed_copy;

static void bg__im2col_task(const void *ctx, int64_t task, void *ws)
{
    (void)ws;
    const bg__transposed_copy *t = (const bg__transposed_copy *)ctx;
    const bg_conv2d_params *p = t->p;
    const int64_t KHW = p->KH * p->KW, N = p->OH * p->OW;
    const int64_t last = bg__min64((task + 1) * t->per_task, p->C / p->group * KHW);
    for (int64_t k = task * t->per_task; k < last; ++k)
        bg__im2col_row(p, t->xg + k / KHW * p->H * p->W, k % KHW / p->KW, k % p->KW, 0, 0, N,
                       t->cols + k * N);
}

/* Y = (Y^T)^T in 16 x 16 blocks: a whole row or column of either would leave the cache
 * between uses. */
static void bg__untranspose_task(const void *ctx, int64_t task, void *ws)
{
    (void)ws;
    const bg__transposed_copy *t = (const bg__transposed_copy *)ctx;
    const int64_t Mg = t->p->M / t->p->group, N = t->p->OH * t->p->OW;
    const int64_t last = bg__min64((task + 1) * t->per_task * 16, Mg);
    for (int64_t m0 = task * t->per_task * 16; m0 < last; m0 += 16)
        for (int64_t j0 = 0; j0 < N; j0 += 16) {
            const int64_t m1 = bg__min64(m0 + 16, Mg), j1 = bg__min64(j0 + 16, N);
            for (int64_t m = m0; m < m1; ++m)
                for (int64_t j = j0; j < j1; ++j) t->yg[m * N + j] = t->yt[j * Mg + m];
        }
}

/* One image-group of the transposed form; pg: its filters packed as B, epg: its epilogue
 * (per output channel), ws: workspace of bg__conv_transposed_floats. */
static void bg__conv2d_transposed(const bg_conv2d_params *p, const float *xg, const float *pg,
                                  const bg_epilogue *epg, float *yg, float *ws,
                                  bg_threadpool *pool)
{
    const int64_t Mg = p->M / p->group, N = p->OH * p->OW, KHW = p->KH * p->KW;
    const int64_t K = p->C / p->group * KHW;
    const int pointwise = bg__conv_is_pointwise(p);
    float *const cols = ws, *const yt = ws + (pointwise ? 0 : bg__round_up(K * N, 16));
    float *const gemm_ws = yt + bg__round_up(N * Mg, 16);
    bg__transposed_copy copy = {p, xg, cols, yt, yg, 0};
    if (!pointwise) {
        copy.per_task = bg__copy_per_task(K, N, pool);
        bg_parallel(pool, (K + copy.per_task - 1) / copy.per_task, bg__im2col_task, &copy,
                    NULL);
    }
    bg_epilogue ept = *epg;
    ept.bias_axis = 0; /* the output channels are Y^T's columns */
    bg_sgemm_prepacked(1, N, Mg, K, 1.0f, pointwise ? xg : cols, N, pg, 0.0f, yt, Mg, &ept,
                       gemm_ws, pool);
    const int64_t blocks = (Mg + 15) / 16;
    copy.per_task = bg__copy_per_task(blocks, 16 * N, pool);
    bg_parallel(pool, (blocks + copy.per_task - 1) / copy.per_task, bg__untranspose_task,
                &copy, NULL);
}

/* The packed form's padded copy (bg__conv_im2col_padded), in chunks of channels the
 * pool's threads share. */
typedef struct bg__pad_copy {
    const bg_conv2d_params *p;
    const float *xg;
    float *image;
    int64_t hp, wp, per_task;
} bg__pad_copy;

static void bg__pad_task(const void *ctx, int64_t task, void *ws)
{
    (void)ws;
    const bg__pad_copy *t = (const bg__pad_copy *)ctx;
    const int64_t last = bg__min64((task + 1) * t->per_task, t->p->C / t->p->group);
    for (int64_t c = task * t->per_task; c < last; ++c)
        bg__pad_plane(t->p, t->xg + c * t->p->H * t->p->W, t->hp, t->wp,
                      t->image + c * t->hp * t->wp);
}

/* The GEMM of image n, group g (task n * group + g) of a convolution's GEMM form. */
typedef struct bg__conv_gemm {
    const bg_conv2d_params *p;
    const float *X, *Wt, *packed;
    const bg_epilogue *ep;
    float *Y;
    bg_threadpool *pool; /* NULL when the tasks themselves run in parallel */
} bg__conv_gemm;

static void bg__conv2d_gemm_task(const void *ctx, int64_t task, void *workspace)
{
    const bg__conv_gemm *c = (const bg__conv_gemm *)ctx;
    const bg_conv2d_params *p = c->p;
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group;
    const int64_t Kg = Cg * p->KH * p->KW, Ng = p->OH * p->OW;
    const int64_t n = task / p->group, g = task % p->group;
    const float *xg = c->X + (n * p->C + g * Cg) * p->H * p->W;
    const float *wg = c->Wt ? c->Wt + g * Mg * Kg : NULL;
    const int transposed = c->packed && bg__conv_transposed_plan(p);
    const int64_t panel_rows =
        transposed ? bg__round_up(Mg, BG_GEMM_NR) : bg__round_up(Mg, BG_GEMM_MR);
    const float *pg = c->packed ? c->packed + g * panel_rows * Kg : NULL;
    float *yg = c->Y + (n * p->M + g * Mg) * Ng;
    bg_epilogue epg = {NULL, 1, BG_ACT_NONE, 0.0f, 0.0f, NULL};
    if (c->ep) { /* per output channel: the rows of this group's GEMM */
        epg = *c->ep;
        epg.bias_axis = 1;
        if (c->ep->bias) epg.bias = c->ep->bias + g * Mg;
        if (c->ep->scale) epg.scale = c->ep->scale + g * Mg;
    }
    if (transposed) {
        bg__conv2d_transposed(p, xg, pg, &epg, yg, bg__align64(workspace), c->pool);
        return;
    }
    bg__conv_shift shift;
    if (pg && bg__conv_shift_plan(p, &shift)) {
        bg__conv2d_shifted(p, &shift, xg, pg, &epg, yg, bg__align64(workspace), c->pool);
        return;
    }
    if (bg__conv_is_pointwise(p) && !pg) { /* bg_sgemm: its matrix-vector paths for 1s */
        bg_sgemm(0, 0, Mg, Ng, Kg, 1.0f, wg, Kg, xg, Ng, 0.0f, yg, Ng, &epg, workspace,
                 c->pool);
        return;
    }
    /* The image im2col reads: the input, or its padded copy with a view of no padding. */
    bg_conv2d_params view = *p;
    int64_t hp, wp;
    if (!bg__conv_is_pointwise(p) && bg__conv_im2col_padded(p, &hp, &wp)) {
        float *const padded = bg__align64(workspace) + bg__conv_packed_floats(p);
        bg__pad_copy copy = {p, xg, padded, hp, wp, bg__copy_per_task(Cg, hp * wp, c->pool)};
        bg_parallel(c->pool, (Cg + copy.per_task - 1) / copy.per_task, bg__pad_task, &copy,
                    NULL);
        view.H = hp, view.W = wp, view.pad_top = view.pad_left = 0;
        xg = padded;
    }
    const bg__bsrc src = bg__conv_is_pointwise(p)
                             ? (bg__bsrc){bg__pack_b_matrix, xg, Ng, 0, NULL, NULL, 1, 0, 0}
                             : (bg__bsrc){bg__pack_b_im2col, xg, 0, 0, &view, NULL, 0, 0, 0};
    const bg__gemm gemm = {Mg, Ng, Kg, 1.0f, 0.0f, 0, wg, Kg, pg, &src, yg, Ng, &epg};
    bg__gemm_run(&gemm, bg__align64(workspace), c->pool);
}

/* The GEMM form (Cg > 1); packed: NULL, or the filters from bg_conv2d_pack_weights. With
 * enough (image, group) GEMMs to share out evenly, each thread takes whole GEMMs; otherwise
 * each GEMM is split across the threads. */
static void bg__conv2d_gemm(const bg_conv2d_params *p, const float *X, const float *Wt,
                            const float *packed, const bg_epilogue *ep, float *Y,
                            void *workspace, bg_threadpool *pool)
{
    const int64_t gemms = p->N * p->group, threads = bg_threadpool_threads(pool);
    const int whole = threads > 1 && (gemms >= 4 * threads || gemms % threads == 0);
    const bg__conv_gemm c = {p, X, Wt, packed, ep, Y, whole ? NULL : pool};
    bg_parallel(whole ? pool : NULL, gemms, bg__conv2d_gemm_task, &c, workspace);
}
