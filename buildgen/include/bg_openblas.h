/* Helpers of the modules that the openblas backend generates: im2col, which packs a
 * convolution's input windows into the column matrix that one cblas_sgemm multiplies.
 *
 * Header-only (static functions): each generated module compiles its own copy.
 */
#ifndef BG_OPENBLAS_H
#define BG_OPENBLAS_H

#include <stdint.h>
#include <string.h>

/* One image and one group of a 2-D convolution (1-D runs as height 1). */
typedef struct bg_im2col_geometry {
    int64_t channels;   /* input channels of the group */
    int64_t ih, iw;     /* input height and width */
    int64_t kh, kw;     /* kernel */
    int64_t sh, sw;     /* strides */
    int64_t dh, dw;     /* dilations */
    int64_t ph, pw;     /* padding before (top, left); the end padding is implied by oh, ow */
    int64_t oh, ow;     /* output height and width */
} bg_im2col_geometry;

/* col[(c * kh + ki) * kw + kj][oy * ow + ox] = x[c][oy * sh - ph + ki * dh][ox * sw - pw + kj * dw],
 * zero where that position falls in the padding. col holds channels * kh * kw * oh * ow floats.
 * Rows are written left to right with the in-bounds span found once per row, so the inner
 * loop is a copy (memcpy for unit stride) and the zeros are memsets. */
static inline void bg_im2col(const float *restrict x, const bg_im2col_geometry *g, float *restrict col)
{
    const int64_t out_plane = g->oh * g->ow;
    for (int64_t c = 0; c < g->channels; ++c) {
        const float *plane = x + c * g->ih * g->iw;
        for (int64_t ki = 0; ki < g->kh; ++ki) {
            for (int64_t kj = 0; kj < g->kw; ++kj) {
                float *row = col + ((c * g->kh + ki) * g->kw + kj) * out_plane;
                const int64_t shift = kj * g->dw - g->pw; /* ix = ox * sw + shift */
                /* [lo, hi): the ox whose ix lies in [0, iw) */
                int64_t lo = shift >= 0 ? 0 : (-shift + g->sw - 1) / g->sw;
                int64_t hi = g->iw - shift <= 0 ? 0 : (g->iw - shift + g->sw - 1) / g->sw;
                if (hi > g->ow) hi = g->ow;
                if (lo > hi) lo = hi;
                for (int64_t oy = 0; oy < g->oh; ++oy) {
                    float *dst = row + oy * g->ow;
                    const int64_t iy = oy * g->sh - g->ph + ki * g->dh;
                    if (iy < 0 || iy >= g->ih) {
                        memset(dst, 0, (size_t)g->ow * sizeof(float));
                        continue;
                    }
                    const float *src = plane + iy * g->iw; /* the input row */
                    if (lo > 0) memset(dst, 0, (size_t)lo * sizeof(float));
                    if (g->sw == 1) {
                        memcpy(dst + lo, src + lo + shift, (size_t)(hi - lo) * sizeof(float));
                    } else {
                        for (int64_t ox = lo; ox < hi; ++ox) dst[ox] = src[ox * g->sw + shift];
                    }
                    if (hi < g->ow) memset(dst + hi, 0, (size_t)(g->ow - hi) * sizeof(float));
                }
            }
        }
    }
}

#endif
