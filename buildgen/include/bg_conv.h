/* bg_conv.h — 2-D convolution (part of bg_kernels.h; include that instead).
 *
 * Per image and group, a convolution is the GEMM
 *     Y_g[Mg, OH*OW] = W_g[Mg, Cg*KH*KW] @ im2col(X_g)[Cg*KH*KW, OH*OW].
 * The im2col matrix is never materialised: the GEMM's B-packing step reads the image
 * straight into its KC x NR micro-panels (an "implicit im2col"), so the workspace is the
 * GEMM's packing space (and, where the windows reach into the padding, a padded copy of
 * the image), and no im2col-sized copy is written and read back.
 * 1x1 stride-1 unpadded convolutions need no im2col at all: X_g is B as it stands.
 * Stride-1 convolutions with filters packed ahead of time may skip the packing of B too:
 * over a padded copy of the image each im2col row is the flat image shifted (the shifted
 * form, below), so the GEMM reads B in place.
 * Convolutions with one input channel per group (depthwise) use a direct sliding window
 * over a zero-padded copy of each plane instead: as a GEMM they would be a K = KH*KW sliver
 * per group, all packing and no arithmetic.
 */
#ifndef BG_GEMM_H
#error "include bg_kernels.h, not bg_conv.h"
#endif
#ifndef BG_CONV_H
#define BG_CONV_H

typedef struct bg_conv2d_params {
    int64_t N, C, H, W;        /* input NCHW */
    int64_t M, OH, OW;         /* output channels and spatial size (caller computes) */
    int64_t KH, KW, group;
    int64_t stride_h, stride_w, dil_h, dil_w;
    int64_t pad_top, pad_left; /* bottom/right padding is implied by OH/OW */
} bg_conv2d_params;


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

/* The direct (sliding window) form: one input channel per group and fewer than 8 output
 * channels each. With more (a single-channel image into many filters, an STFT as a
 * convolution) the GEMM form shares each loaded input among its rows of filters. */
#define BG__CONV_DIRECT_MAX_MG 8
static inline int bg__conv_is_direct(const bg_conv2d_params *p)
{
    return p->C / p->group == 1 && p->M / p->group < BG__CONV_DIRECT_MAX_MG;
}

static inline int bg__conv_is_pointwise(const bg_conv2d_params *p)
{
    return p->KH == 1 && p->KW == 1 && p->stride_h == 1 && p->stride_w == 1 &&
           p->pad_top == 0 && p->pad_left == 0 && p->OH == p->H && p->OW == p->W;
}

/* The direct path reads each input plane through a zero-padded copy (when there is
 * padding), so every window lies inside it and no output needs per-tap bounds checks.
 * The copy spans exactly the rows/columns the windows reach: hp x wp. */
static inline int bg__conv_direct_copy(const bg_conv2d_params *p, int64_t *hp, int64_t *wp)
{
    *hp = (p->OH - 1) * p->stride_h + (p->KH - 1) * p->dil_h + 1;
    *wp = (p->OW - 1) * p->stride_w + (p->KW - 1) * p->dil_w + 1;
    return p->pad_top > 0 || p->pad_left > 0 || *hp > p->H || *wp > p->W;
}

/* Depthwise convolutions over small planes, channels last (bg__conv2d_direct_cl_task): a
 * task's padded input block and results, in floats. */
#define BG__DW_CL_MAX_TAPS 64
/* The padded block's rows and columns: what the windows cover and the image's extent. */
static inline void bg__conv_cl_block(const bg_conv2d_params *p, int64_t *hc, int64_t *wc)
{
    int64_t hp, wp;
    bg__conv_direct_copy(p, &hp, &wp);
    *hc = bg__max64(hp, p->pad_top + p->H);
    *wc = bg__max64(wp, p->pad_left + p->W);
}

static inline int64_t bg__conv_direct_cl_floats(const bg_conv2d_params *p)
{
    int64_t hc, wc;
    bg__conv_cl_block(p, &hc, &wc);
    return 8 * (hc * wc + p->OH * p->OW);
}

/* Taken where a task's block fits a 32 KiB L1 cache. Measured against the per-plane loops
 * (1 thread, interleaved): 0.53-0.65x on the 3x3 to 7x7 planes of MobileNetV2 and
 * EfficientNet-B0 (strided, 5x5, stride 1 alike), 0.82-0.90x on 12x12 and 14x14 ones
 * (0.9-1.03x at 3x3 taps and stride 1), 1.0-1.5x past it (24x24 at stride 1). */
static inline int bg__conv_direct_cl(const bg_conv2d_params *p)
{
    return p->M == p->C && p->group == p->C && p->KH * p->KW <= BG__DW_CL_MAX_TAPS &&
           bg__conv_direct_cl_floats(p) <= 8 * 1024;
}

/* The pixel form's plan (bg__conv2d_pixel, below). Its filter vectors are as wide as the
 * GEMM's (16 lanes at x86-64-v4, else 8), up to four a pixel. */
#if BG_GEMM_VW == 16
#define BG__PIX_VW 16
typedef bg__v16f bg__pixv;
typedef float bg__pixv_u __attribute__((vector_size(64), aligned(4)));
#define BG__PIX_LOAD BG__LOAD16 /* (into a scalar: not an element of an array, see below) */
#define BG__PIX_STORE BG__STORE16
#define BG__PIX_SPLAT BG__SPLAT16
#define BG__PIX_FMA BG__FMA16
#else
#define BG__PIX_VW 8
typedef bg_v8f bg__pixv;
typedef float bg__pixv_u __attribute__((vector_size(32), aligned(4)));
#define BG__PIX_LOAD BG_LOAD8
#define BG__PIX_STORE BG_STORE8
#define BG__PIX_SPLAT BG_SPLAT8
#define BG__PIX_FMA BG_FMA8
#endif
/* A filter vector read as a value: BG_LOAD8's memcpy into an array of them was copied
 * through the stack in 16-byte pieces and read back whole (a store-forwarding stall). */
#define BG__PIX_GET(src) ((bg__pixv)*(const bg__pixv_u *)(src))
#define BG__CONV_PIXEL_MAX_C 4
#define BG__CONV_PIXEL_MAX_M (4 * BG__PIX_VW)
/* Past 32 filters, only from 64 taps a pixel: with fewer, a tile's fixed costs (zeroing,
 * epilogue, copy-out) outweigh its multiply-adds, and 3 -> 64 at 3x3 (SqueezeNet's stem)
 * ran 1.05-1.2x the shifted form's time at 16 lanes, where ResNet-50's 7x7 one ran 0.9. */
#define BG__CONV_PIXEL_WIDE_MIN_K 64
#define BG__CONV_PIXEL_TILE 512 /* pixels a tile of results holds */
/* Strided only: at stride 1 the shifted form reads the image in place as well, and was
 * faster (3 -> 32 channels at 32x32: 1.16x; one channel into 8 filters: 1.67x). Against the
 * GEMM forms, 1 thread / 2 threads: MobileNetV2's 3 -> 16 stem at 96x96 0.84 / 0.54,
 * 3 -> 16 at 224x224 0.85 / 0.62, YOLOv8n's at 640x640 0.68 / 0.58, EfficientNet-B0's
 * 3 -> 32 at 224x224 0.87-1.0 / 0.61 (8 lanes); 3 -> 32 at 224x224 at 16 lanes 0.5-0.65. */
static inline int bg__conv_pixel_plan(const bg_conv2d_params *p)
{
    const int filters = p->M <= 32 || (p->M <= BG__CONV_PIXEL_MAX_M &&
                                       p->C * p->KH * p->KW >= BG__CONV_PIXEL_WIDE_MIN_K);
    return p->group == 1 && p->C <= BG__CONV_PIXEL_MAX_C && filters && p->OW >= 8 &&
           p->KH * p->KW > 1 && (p->stride_h > 1 || p->stride_w > 1) && !bg__conv_is_direct(p);
}

static inline int64_t bg__conv_pixel_filter_floats(const bg_conv2d_params *p)
{
    return p->C * p->KH * p->KW * bg__round_up(p->M, BG__PIX_VW);
}

/* Its workspace: a tile of results, then (filters not packed at create) the packed filters. */
static inline int64_t bg__conv_pixel_floats(const bg_conv2d_params *p)
{
    return BG__CONV_PIXEL_TILE * bg__round_up(p->M, BG__PIX_VW) + bg__conv_pixel_filter_floats(p);
}

/* ---- The transposed form: few output pixels, many filters ----
 * A GEMM's tiles are MR rows (filters) by NR columns (output pixels), 4 x 24 or 8 x 32: with
 * 4 or 49 pixels (a 1-D convolution over a short sequence, a 7x7 stage) most of each tile's
 * columns are padding. Computing Y^T = im2col^T W^T instead puts the pixels on the MR-row side
 * and the filters on the NR-column side (filters packed as B at create, the epilogue applied
 * per column), then transposes the small result into Y. Each output is still one dot
 * product over the same K slices in the same order: the same bits as the other forms. */
static inline int bg__conv_transposed_plan(const bg_conv2d_params *p)
{
    if (bg__conv_is_direct(p)) return 0;
    const int64_t Mg = p->M / p->group, N = p->OH * p->OW;
    const int64_t lanes = bg__round_up(N, BG_GEMM_NR) * bg__round_up(Mg, BG_GEMM_MR);
    const int64_t lanes_t = bg__round_up(N, BG_GEMM_MR) * bg__round_up(Mg, BG_GEMM_NR);
    /* An eighth fewer lanes pays for the transposes: measured 0.84-0.93x on the 3x3 and
     * 1x1 layers of Inception-v2's and ResNet-50's 7x7 stages (0.77-0.81 of the lanes)
     * against the shifted and packed forms, at 1 and 2 threads; not at 14x14 (0.93). */
    return 8 * lanes_t < 7 * lanes;
}

/* ---- The shifted form: a convolution whose GEMM reads B in place ----
 * At stride 1, padded to hp x wp and laid out flat, tap (c, kh, kw) of output pixel
 * (oh, ow) is element
 *     c*hp*wp + kh*dil_h*wp + kw*dil_w + q   at   q = oh*wp + ow,
 * so each im2col row is the flat padded image shifted, and the GEMM reads it in place
 * through a table of shifts (bg__bsrc.rows): nothing is packed. At stride s the padded
 * plane is first split into s x s phase planes (rows i*s + ph, columns j*s + pw), hq x wq
 * each: a tap then reads phase (kh*dil_h % s, kw*dil_w % s) shifted by
 * (kh*dil_h / s, kw*dil_w / s), and q = oh*wq + ow again. Where OW is a multiple of the
 * vector width ("aligned": 16x16 and 32x32 maps at 16 lanes) no micro-kernel vector
 * straddles two output rows, so the GEMM computes Y's own columns, each vector read from
 * its row of the image (bg__bsrc.row_width), straight into Y. Otherwise its output has wq
 * columns per output row, of which the last wq - OW are discarded as it is copied into Y
 * (a 16x16 map at 3x3: 288 columns computed for 256, and the copy). It runs
 * in bands of output rows whose product stays in L2 until that copy. It pays when the
 * packing it saves (about 12 multiply-adds' time per im2col element, measured on 3x3
 * layers: bench/kernels_conv.py) outweighs the discarded columns and the copy: it does for
 * 16..64 channels at 16x16..112x112, not for 3 input channels nor at 7x7. Every tile is
 * computed as the packed form's (same K slices, same micro-kernel): both give the same bits. */
typedef struct bg__conv_shift {
    int64_t hp, wp;    /* the padded plane */
    int64_t hq, wq;    /* a phase plane (hp x wp at stride 1) */
    int64_t band_rows; /* output rows per band */
    int64_t image;     /* floats of the padded image: its planes, then NR of slack */
    int64_t product;   /* floats of one band's GEMM output, Mg x its columns (0: aligned) */
    int aligned;       /* OW is a multiple of the vector width: the GEMM writes Y */
} bg__conv_shift;

/* 0 turns the shifted form off (to compare the two forms; workspace.py assumes it on). */
#ifndef BG_CONV_SHIFTED
#define BG_CONV_SHIFTED 1
#endif
/* The largest K (Cg*KH*KW) of a strided convolution the shifted form takes. */
#define BG__CONV_STRIDED_MAX_K 288
/* A band's product, in floats: 192 KiB, with the image rows it reads, stays in L2. */
#define BG__CONV_BAND_FLOATS (48 * 1024)

/* GEMM columns of a band of `rows` output rows: Y's when aligned, else the image's, all
 * but the last row's discarded tail. */
static inline int64_t bg__conv_band_columns(const bg_conv2d_params *p, const bg__conv_shift *s,
                                            int64_t rows)
{
    return s->aligned ? rows * p->OW : (rows - 1) * s->wq + p->OW;
}

/* Whether p takes the shifted form, and its geometry in s. */
static inline int bg__conv_shift_plan(const bg_conv2d_params *p, bg__conv_shift *s)
{
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group, OH = p->OH, N = OH * p->OW;
    const int64_t K = Cg * p->KH * p->KW, NR = BG_GEMM_NR;
    const int64_t sh = p->stride_h, sw = p->stride_w;
    if (!BG_CONV_SHIFTED || p->KH * p->KW == 1 || bg__conv_is_direct(p) ||
        bg__conv_transposed_plan(p))
        return 0;
    /* Strided, the taps read s*s phase planes: measured 1.03-1.2x faster up to 32 channels
     * of 3x3 (and a 7x7 stem), 0.87-1.0x from 64 on. */
    if ((sh > 1 || sw > 1) && K > BG__CONV_STRIDED_MAX_K) return 0;
    s->hp = (OH - 1) * sh + (p->KH - 1) * p->dil_h + 1;
    s->wp = (p->OW - 1) * sw + (p->KW - 1) * p->dil_w + 1;
    s->hq = (s->hp + sh - 1) / sh;
    s->wq = (s->wp + sw - 1) / sw;
    s->band_rows = bg__min64(OH, bg__max64(1, BG__CONV_BAND_FLOATS / (Mg * s->wq)));
    s->aligned = p->OW % BG_GEMM_VW == 0;
    /* The last tile reads up to NR - 1 floats past the last plane (bg__bsrc.rows). */
    s->image = bg__round_up(Cg * sh * sw * s->hq * s->wq + NR, 16);
    s->product =
        s->aligned ? 0 : bg__round_up(Mg * bg__conv_band_columns(p, s, s->band_rows), 16);
    /* Estimated time in multiply-adds: tiles computed, packing, the copy into Y. */
    const int64_t full = OH / s->band_rows, rest = OH % s->band_rows;
    int64_t tiles = full * bg__round_up(bg__conv_band_columns(p, s, s->band_rows), NR);
    if (rest) tiles += bg__round_up(bg__conv_band_columns(p, s, rest), NR);
    const int64_t rows = bg__round_up(Mg, BG_GEMM_MR);
    const int64_t copy = s->aligned ? 0 : 4 * Mg * N;
    return tiles * rows * K + copy < bg__round_up(N, NR) * rows * K + 12 * N * K;
}

/* Floats of workspace the shifted form takes: image, product, then the table of shifts. */
static inline int64_t bg__conv_shift_floats(const bg_conv2d_params *p, const bg__conv_shift *s)
{
    return s->image + s->product + 2 * (p->C / p->group) * p->KH * p->KW;
}

/* Floats of workspace the transposed form takes: the im2col matrix (none for 1x1), Y^T,
 * then the GEMM's own. */
static inline int64_t bg__conv_transposed_floats(const bg_conv2d_params *p)
{
    const int64_t Mg = p->M / p->group, N = p->OH * p->OW, K = p->C / p->group * p->KH * p->KW;
    const int64_t cols = bg__conv_is_pointwise(p) ? 0 : bg__round_up(K * N, 16);
    return cols + bg__round_up(N * Mg, 16) +
           ((int64_t)bg_sgemm_workspace_bytes(N, Mg, K) + 3) / 4;
}

/* ---- The packed form over a zero-padded copy of the image ----
 * Where the windows reach into the padding, an im2col row of a small image is mostly edge
 * cases: each output row's run of OW values is cut into zeros and a short copy, and on an
 * 8x8 image with 3x3 taps the packing took more than half the layer's time. Over a
 * padded copy (hp x wp, what the windows cover) every run is one plain copy. The copy
 * costs Cg*hp*wp floats of workspace, after the GEMM's packing space.
 * bg__pack_b_im2col relies on it: the windows it reads lie inside its image. */
static inline int bg__conv_im2col_padded(const bg_conv2d_params *p, int64_t *hp, int64_t *wp)
{
    return bg__conv_direct_copy(p, hp, wp);
}

/* Floats of the packed form's workspace before the padded copy. */
static inline int64_t bg__conv_packed_floats(const bg_conv2d_params *p)
{
    const int64_t Mg = p->M / p->group, Ng = p->OH * p->OW;
    const int64_t Kg = p->C / p->group * p->KH * p->KW;
    return bg__round_up((int64_t)(bg_sgemm_workspace_bytes(Mg, Ng, Kg) / sizeof(float)), 16);
}

BG_API size_t bg_conv2d_workspace_bytes(const bg_conv2d_params *p)
{
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group;
    if (bg__conv_pixel_plan(p)) return (size_t)bg__conv_pixel_floats(p) * sizeof(float) + 64;
    if (bg__conv_is_direct(p)) {
        int64_t hp, wp;
        if (bg__conv_direct_cl(p)) return (size_t)bg__conv_direct_cl_floats(p) * sizeof(float) + 64;
        if (!bg__conv_direct_copy(p, &hp, &wp)) return 0;
        return (size_t)(hp * wp) * sizeof(float) + 64;
    }
    /* GEMM packing space (then the padded copy). */
    const int64_t Ng = p->OH * p->OW;
    int64_t hp, wp;
    size_t bytes = bg_sgemm_workspace_bytes(Mg, Ng, Cg * p->KH * p->KW);
    if (bg__conv_im2col_padded(p, &hp, &wp))
        bytes = (size_t)(bg__conv_packed_floats(p) + Cg * hp * wp) * sizeof(float) + 64;
    bg__conv_shift s;
    if (bg__conv_transposed_plan(p)) {
        const size_t transposed = (size_t)bg__conv_transposed_floats(p) * sizeof(float) + 64;
        if (transposed > bytes) bytes = transposed;
    } else if (bg__conv_shift_plan(p, &s)) {
        const size_t shifted = (size_t)bg__conv_shift_floats(p, &s) * sizeof(float) + 64;
        if (shifted > bytes) bytes = shifted;
    }
    return bytes;
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

/* ---- Convolutions with one input channel per group (depthwise) ----
 * Output channel m reads input channel m / (M / group): a weighted sliding window over a
 * plane whose windows all lie inside it (the zero-padded copy when there is padding), so
 * there are no edge columns. Outputs go in blocks of R rows x NV vectors of 8 (1 x 4; for
 * narrower rows 2 x 3 or 4 x 1), so independent accumulators hide the FMA latency. A row's last < 32 columns are one step of 1-3 vectors ending at the row's end
 * (recomputing a few outputs rather than running a scalar tail). The epilogue is applied in
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
    const int64_t tasks_wanted = bg_threadpool_threads(pool) > 1 ? 8 * bg_threadpool_threads(pool) : 1;
    const int64_t rows = bg__max64(1, p->N * p->OH / tasks_wanted);
    const bg__conv_pixel t = {p, X, wp, ep, Y, bg__min64(rows, p->OH)};
    const int64_t bands = (p->OH + t.rows - 1) / t.rows;
    bg_parallel(pool, p->N * bands, bg__conv_pixel_task, &t, workspace);
}

/* Y[N,M,OH,OW] = epilogue(conv(X, Wt[M, C/group, KH, KW])). The bias and scale (if any) are
 * per output channel whatever ep->bias_axis says. pool: NULL or the instance's (see bg_sgemm). */
BG_API void bg_conv2d(const bg_conv2d_params *p, const float *X, const float *Wt,
                      const bg_epilogue *ep, float *Y, void *workspace, bg_threadpool *pool)
{
    if (bg__conv_is_direct(p)) {
        bg__conv2d_direct(p, X, Wt, ep, Y, workspace, pool);
    } else if (bg__conv_pixel_plan(p)) { /* the filters packed here, at the workspace's end */
        float *wp = bg__align64(workspace) + BG__CONV_PIXEL_TILE * bg__round_up(p->M, BG__PIX_VW);
        bg__conv_pixel_pack(p, Wt, wp);
        bg__conv2d_pixel(p, X, wp, ep, Y, workspace, pool);
    } else {
        bg__conv2d_gemm(p, X, Wt, NULL, ep, Y, workspace, pool);
    }
}

/* ---- Filters packed once (at create) into the GEMM's A panels, per group ----
 * (B panels in the transposed form.) Only the GEMM form packs: the direct form (depthwise) reads its filters in place (0
 * bytes; bg_conv2d_prepacked then needs the original). */

BG_API size_t bg_conv2d_packed_bytes(const bg_conv2d_params *p)
{
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group;
    if (bg__conv_is_direct(p)) return 0;
    if (bg__conv_pixel_plan(p)) return (size_t)bg__conv_pixel_filter_floats(p) * sizeof(float);
    if (bg__conv_transposed_plan(p)) /* as B panels: the transposed form */
        return (size_t)p->group * bg_sgemm_packed_b_bytes(Mg, Cg * p->KH * p->KW);
    return (size_t)p->group * bg_sgemm_packed_a_bytes(Mg, Cg * p->KH * p->KW);
}

BG_API void bg_conv2d_pack_weights(const bg_conv2d_params *p, const float *Wt, void *packed)
{
    const int64_t Cg = p->C / p->group, Mg = p->M / p->group, Kg = Cg * p->KH * p->KW;
    if (bg__conv_is_direct(p)) return;
    if (bg__conv_pixel_plan(p)) {
        bg__conv_pixel_pack(p, Wt, (float *)packed);
        return;
    }
    if (bg__conv_transposed_plan(p)) {
        for (int64_t g = 0; g < p->group; ++g)
            bg_sgemm_pack_b(1, Mg, Kg, Wt + g * Mg * Kg, Kg,
                            (float *)packed + g * bg__round_up(Mg, BG_GEMM_NR) * Kg);
        return;
    }
    for (int64_t g = 0; g < p->group; ++g)
        bg_sgemm_pack_a(0, Mg, Kg, Wt + g * Mg * Kg, Kg,
                        (float *)packed + g * bg__round_up(Mg, BG_GEMM_MR) * Kg);
}

/* bg_conv2d with the filters from bg_conv2d_pack_weights (the GEMM form only). */
BG_API void bg_conv2d_prepacked(const bg_conv2d_params *p, const float *X, const void *packed,
                                const bg_epilogue *ep, float *Y, void *workspace, bg_threadpool *pool)
{
    if (bg__conv_pixel_plan(p))
        bg__conv2d_pixel(p, X, (const float *)packed, ep, Y, workspace, pool);
    else
        bg__conv2d_gemm(p, X, NULL, (const float *)packed, ep, Y, workspace, pool);
}

/* ---- An inference BatchNormalization folded into the Conv before it ----
 * Instead of a pass of its own over the Conv's output, the normalisation becomes the
 * epilogue's per-channel scale and bias (bg_epilogue.scale), computed once at create:
 *     scale = gamma / sqrt(var + eps),  shift = beta - mean * scale (+ conv_bias * scale)
 * with the formulas of the unfolded BatchNormalization kernel, so a Conv without a bias
 * gives the same bits folded or not. dst holds scale[0:C], then shift[0:C]. */

BG_API size_t bg_batchnorm_fold_bytes(int64_t channels)
{
    return channels > 0 ? (size_t)(2 * channels) * sizeof(float) : 0;
}

BG_API void bg_batchnorm_fold(int64_t channels, const float *gamma, const float *beta,
                              const float *mean, const float *var, float eps,
                              const float *conv_bias, void *dst)
{
    float *scale = (float *)dst, *shift = scale + channels;
    for (int64_t c = 0; c < channels; ++c) {
        const float a = gamma[c] / sqrtf(var[c] + eps);
        scale[c] = a;
        shift[c] = beta[c] - mean[c] * a;
        if (conv_bias) shift[c] += conv_bias[c] * a;
    }
}

#endif /* BG_CONV_H */
