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
 * form, bg_conv_gemm.h), so the GEMM reads B in place.
 * Convolutions with one input channel per group (depthwise) use a direct sliding window
 * over a zero-padded copy of each plane instead: as a GEMM they would be a K = KH*KW sliver
 * per group, all packing and no arithmetic.
 *
 * This file holds what decides and sizes: the plan of each form (which one a layer takes,
 * from its shape alone, so the workspace can be sized before a call), the workspace, and
 * the entry points. The forms themselves are parts of their own, included below the plans:
 * bg_conv_depthwise.h (the direct form), bg_conv_gemm.h (packed, shifted and transposed)
 * and bg_conv_pixel.h (the pixel form).
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

/* The pixel form's plan (bg__conv2d_pixel, bg_conv_pixel.h). Its filter vectors are as
 * wide as the GEMM's (16 lanes at x86-64-v4, else 8), up to four a pixel. */
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
/* With 8-lane registers (AVX2, 256-bit SVE), strided layers of up to 32 filters take it
 * from any number of channels: a GEMM with so few rows spends as long packing (or
 * splitting into phase planes) as multiplying. On a Zen 3 (x86-64-v3), pixel / best GEMM
 * form: PP-OCRv6 detection's 32 -> 16 at 320x320 0.49-0.58, 16 -> 16 at 320x320 0.72-0.83,
 * 16 -> 16 at 112x112 0.73, 32 -> 32 at 56x56 0.55-0.81, 64 -> 24 at 80x80 0.51-0.71,
 * 128 -> 16 at 80x80 0.81-0.91; 64 -> 16 at 160x160 1.0-1.4 (noisy). Not measured at 16
 * lanes, which keep the rule above. */
static inline int bg__conv_pixel_channels(const bg_conv2d_params *p)
{
    return p->C <= BG__CONV_PIXEL_MAX_C || (BG__PIX_VW == 8 && p->M <= 32);
}

/* Only with its vectors in registers (BG_NATIVE_V8: AVX, 256-bit SVE): where a bg_v8f is
 * split in two (SSE2, NEON, riscv64) the accumulators spill, and at SSE2 stems ran 3-6x
 * slower than the GEMM forms (3 -> 16 and 3 -> 32 at 224x224: 6.8 against 1.2 ms and 8.4
 * against 2.6). workspace.py's SPLIT tile says the same. */
static inline int bg__conv_pixel_plan(const bg_conv2d_params *p)
{
    const int filters = p->M <= 32 || (p->M <= BG__CONV_PIXEL_MAX_M &&
                                       p->C * p->KH * p->KW >= BG__CONV_PIXEL_WIDE_MIN_K);
    return BG_NATIVE_V8 && p->group == 1 && bg__conv_pixel_channels(p) && filters &&
           p->OW >= 8 &&
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

/* The forms, a part each; the plans above choose among them (bg_conv2d, below). */
#include "bg_conv_depthwise.h"
#include "bg_conv_gemm.h"
#include "bg_conv_pixel.h"

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
 * (B panels in the transposed form.) Only the GEMM forms pack: the direct form (depthwise)
 * reads its filters in place (0 bytes; bg_conv2d_prepacked then needs the original). */

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
                                const bg_epilogue *ep, float *Y, void *workspace,
                                bg_threadpool *pool)
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
