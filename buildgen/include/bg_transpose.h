/* bg_transpose.h — the 2-D transposes behind ONNX Transpose (part of bg_kernels.h; include
 * that instead).
 *
 * The generated loop nest for a transpose (one element a statement, reads strided by a
 * whole row) ran at 2-3 ns an element: each output row reads one element from every input
 * row, and with power-of-two row lengths those rows fall into a few L1 sets and evict each
 * other. Here the copy goes in 8x8 (4x4 without 256-bit registers) tiles transposed in
 * registers by lane shuffles, so every line read or written is used whole: SegFormer's
 * [64,256] -> [256,64] went from 36 us to a few. Other element sizes (and compilers without
 * __builtin_shufflevector) copy the same tiles element by element, which keeps the cache
 * behaviour and loses only the vector width.
 *
 * The common contract: Y[a * ldy + b] = X[b * ldx + a] for a < rows_y, b < cols_y, where X
 * and Y do not overlap; strides are in elements.
 */
#ifndef BG_KERNELS_H
#error "include bg_kernels.h, not bg_transpose.h"
#endif
#ifndef BG_TRANSPOSE_H
#define BG_TRANSPOSE_H

/* The tiles are visited in squares of this many elements a side, so that the output lines a
 * band of input rows writes are still in L1 when the next band finishes them. */
#define BG__TRANSPOSE_BLOCK 64

/* One tile, element by element: any element size, any edge. */
static inline void bg__transpose_tile_bytes(const unsigned char *x, unsigned char *y,
                                            int64_t rows_y, int64_t cols_y, int64_t ldx,
                                            int64_t ldy, size_t size)
{
/* A memcpy of a constant size is one move; of a variable size, a call per element. */
#define BG__TRANSPOSE_ELEMENTS(n)                                                                  \
    for (int64_t a = 0; a < rows_y; ++a)                                                           \
        for (int64_t b = 0; b < cols_y; ++b)                                                       \
            memcpy(y + (size_t)(a * ldy + b) * (n), x + (size_t)(b * ldx + a) * (n), (n))
    switch (size) {
    case 1: BG__TRANSPOSE_ELEMENTS(1); break;
    case 2: BG__TRANSPOSE_ELEMENTS(2); break;
    case 4: BG__TRANSPOSE_ELEMENTS(4); break;
    case 8: BG__TRANSPOSE_ELEMENTS(8); break;
    default: BG__TRANSPOSE_ELEMENTS(size); break;
    }
#undef BG__TRANSPOSE_ELEMENTS
}

#if defined(BG_HAVE_SHUFFLEVECTOR) && BG_NATIVE_V8
#define BG__TRANSPOSE_TILE 8
/* An 8x8 tile of 4-byte elements: unpack pairs of rows, then pairs of pairs, then swap the
 * 128-bit halves (the unpcklps/shufps/vperm2f128 sequence, written portably). */
static inline void bg__transpose_tile32(const unsigned char *x, unsigned char *y, int64_t ldx,
                                        int64_t ldy)
{
    bg_v8f r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) memcpy(&r[i], x + (size_t)(i * ldx) * 4, sizeof r[i]);
    for (int i = 0; i < 8; i += 2) {
        t[i] = BG__SHUF(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = BG__SHUF(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = BG__SHUF(t[i], t[i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[i + 1] = BG__SHUF(t[i], t[i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[i + 2] = BG__SHUF(t[i + 1], t[i + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[i + 3] = BG__SHUF(t[i + 1], t[i + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int i = 0; i < 4; ++i) {
        const bg_v8f lo = BG__SHUF(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        const bg_v8f hi = BG__SHUF(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
        memcpy(y + (size_t)(i * ldy) * 4, &lo, sizeof lo);
        memcpy(y + (size_t)((i + 4) * ldy) * 4, &hi, sizeof hi);
    }
}
#elif defined(BG_HAVE_SHUFFLEVECTOR)
#define BG__TRANSPOSE_TILE 4
/* A 4x4 tile of 4-byte elements in 128-bit registers (SSE, NEON). */
static inline void bg__transpose_tile32(const unsigned char *x, unsigned char *y, int64_t ldx,
                                        int64_t ldy)
{
    bg_v4f r[4], t[4];
    for (int i = 0; i < 4; ++i) memcpy(&r[i], x + (size_t)(i * ldx) * 4, sizeof r[i]);
    t[0] = BG__SHUF(r[0], r[1], 0, 4, 1, 5);
    t[1] = BG__SHUF(r[0], r[1], 2, 6, 3, 7);
    t[2] = BG__SHUF(r[2], r[3], 0, 4, 1, 5);
    t[3] = BG__SHUF(r[2], r[3], 2, 6, 3, 7);
    const bg_v4f c[4] = {BG__SHUF(t[0], t[2], 0, 1, 4, 5), BG__SHUF(t[0], t[2], 2, 3, 6, 7),
                         BG__SHUF(t[1], t[3], 0, 1, 4, 5), BG__SHUF(t[1], t[3], 2, 3, 6, 7)};
    for (int i = 0; i < 4; ++i) memcpy(y + (size_t)(i * ldy) * 4, &c[i], sizeof c[i]);
}
#else
#define BG__TRANSPOSE_TILE 8
static inline void bg__transpose_tile32(const unsigned char *x, unsigned char *y, int64_t ldx,
                                        int64_t ldy)
{
    bg__transpose_tile_bytes(x, y, 8, 8, ldx, ldy, 4);
}
#endif

/* Y = X^T for elements of `size` bytes (see the contract above). */
static inline void bg_transpose2d(const void *X, void *Y, int64_t rows_y, int64_t cols_y,
                                  int64_t ldx, int64_t ldy, size_t size)
{
    const unsigned char *x = (const unsigned char *)X;
    unsigned char *y = (unsigned char *)Y;
    const int64_t tile = BG__TRANSPOSE_TILE, block = BG__TRANSPOSE_BLOCK;
    for (int64_t a0 = 0; a0 < rows_y; a0 += block) {
        const int64_t a1 = bg__min64(a0 + block, rows_y);
        for (int64_t b0 = 0; b0 < cols_y; b0 += block) {
            const int64_t b1 = bg__min64(b0 + block, cols_y);
            for (int64_t b = b0; b < b1; b += tile) {
                const int64_t nb = bg__min64(tile, b1 - b);
                for (int64_t a = a0; a < a1; a += tile) {
                    const int64_t na = bg__min64(tile, a1 - a);
                    const unsigned char *xt = x + (size_t)(b * ldx + a) * size;
                    unsigned char *yt = y + (size_t)(a * ldy + b) * size;
                    if (size == 4 && na == tile && nb == tile)
                        bg__transpose_tile32(xt, yt, ldx, ldy);
                    else
                        bg__transpose_tile_bytes(xt, yt, na, nb, ldx, ldy, size);
                }
            }
        }
    }
}

#endif /* BG_TRANSPOSE_H */
