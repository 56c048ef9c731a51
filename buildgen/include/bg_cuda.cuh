/* Generic CUDA kernels of buildgen's `cuda` device backend (float32, row-major).
 *
 * The generated module (src/cuda.cu) fuses elementwise chains into kernels of its own and
 * calls these for everything else, with every shape baked in at the call. They aim to be
 * correct and reasonably coalesced, not fast: a library backend (cublas, cudnn, cutlass)
 * takes the heavy ops where the target has one. Indices are 64-bit throughout.
 */
#ifndef BG_CUDA_CUH
#define BG_CUDA_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#define BG_MAX_DIMS 8
#define BG_THREADS 256
#define BG_TILE 16

struct bg_dims {
    int rank;
    int64_t size[BG_MAX_DIMS];    /* the output's dims */
    int64_t stride[BG_MAX_DIMS];  /* the input's element stride for each output dim */
};

/* Blocks for n elements with BG_THREADS threads (the kernels loop over the rest). */
static inline unsigned bg_blocks(int64_t n)
{
    int64_t b = (n + BG_THREADS - 1) / BG_THREADS;
    if (b < 1) b = 1;
    if (b > 65535 * 16) b = 65535 * 16;
    return (unsigned)b;
}

#define BG_FOR(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (int64_t)gridDim.x * blockDim.x)

/* Batched C[b] = alpha * A[b] @ B[b] (+ beta * bias), shared-memory tiles of BG_TILE.
 * Element (m, k) of batch b of A is A[a_off(b) + m * sam + k * sak] (a transpose is a
 * stride swap); the batch offsets come from `batch` (dims of the output's batch, strides of
 * A, B in units of elements; 0 = broadcast). The bias is bias[m * sbm + n * sbn] (0 = broadcast). */
struct bg_gemm_args {
    int64_t m, n, k;
    int64_t sam, sak, sbk, sbn;
    struct bg_dims batch_a, batch_b;
    int64_t batches;
    float alpha, beta;
    int64_t sbm_bias, sbn_bias;
};

__global__ void bg_gemm(const float *__restrict__ a, const float *__restrict__ b,
                        const float *__restrict__ bias, float *__restrict__ c,
                        struct bg_gemm_args p)
{
    __shared__ float ta[BG_TILE][BG_TILE + 1];
    __shared__ float tb[BG_TILE][BG_TILE + 1];
    int64_t batch = blockIdx.z;
    int64_t row = (int64_t)blockIdx.y * BG_TILE + threadIdx.y;
    int64_t col = (int64_t)blockIdx.x * BG_TILE + threadIdx.x;
    int64_t oa = 0, ob = 0, rest = batch;
    for (int d = p.batch_a.rank - 1; d >= 0; --d) {
        int64_t i = rest % p.batch_a.size[d];
        rest /= p.batch_a.size[d];
        oa += i * p.batch_a.stride[d];
        ob += i * p.batch_b.stride[d];
    }
    float acc = 0.0f;
    for (int64_t k0 = 0; k0 < p.k; k0 += BG_TILE) {
        int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        ta[threadIdx.y][threadIdx.x] =
            (row < p.m && ka < p.k) ? a[oa + row * p.sam + ka * p.sak] : 0.0f;
        tb[threadIdx.y][threadIdx.x] =
            (kb < p.k && col < p.n) ? b[ob + kb * p.sbk + col * p.sbn] : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < BG_TILE; ++kk) acc += ta[threadIdx.y][kk] * tb[kk][threadIdx.x];
        __syncthreads();
    }
    if (row < p.m && col < p.n) {
        float v = p.alpha * acc;
        if (bias) v += p.beta * bias[row * p.sbm_bias + col * p.sbn_bias];
        c[batch * p.m * p.n + row * p.n + col] = v;
    }
}

/* Direct 2-D convolution, one thread per output element (N, M, OH, OW); group g. */
struct bg_conv_args {
    int64_t n, c, h, w, m, oh, ow, kh, kw;
    int64_t group, sh, sw, ph, pw, dh, dw;
};

__global__ void bg_conv2d(const float *__restrict__ x, const float *__restrict__ w,
                          const float *__restrict__ bias, float *__restrict__ y,
                          struct bg_conv_args p)
{
    int64_t total = p.n * p.m * p.oh * p.ow;
    int64_t cg = p.c / p.group, mg = p.m / p.group;
    BG_FOR(i, total) {
        int64_t ox = i % p.ow, oy = (i / p.ow) % p.oh;
        int64_t oc = (i / (p.ow * p.oh)) % p.m, n = i / (p.ow * p.oh * p.m);
        int64_t g = oc / mg;
        float acc = bias ? bias[oc] : 0.0f;
        for (int64_t ci = 0; ci < cg; ++ci) {
            const float *xc = x + ((n * p.c) + g * cg + ci) * p.h * p.w;
            const float *wc = w + (oc * cg + ci) * p.kh * p.kw;
            for (int64_t ky = 0; ky < p.kh; ++ky) {
                int64_t iy = oy * p.sh - p.ph + ky * p.dh;
                if (iy < 0 || iy >= p.h) continue;
                for (int64_t kx = 0; kx < p.kw; ++kx) {
                    int64_t ix = ox * p.sw - p.pw + kx * p.dw;
                    if (ix < 0 || ix >= p.w) continue;
                    acc += xc[iy * p.w + ix] * wc[ky * p.kw + kx];
                }
            }
        }
        y[i] = acc;
    }
}

/* 2-D max / average pooling over (N*C, H, W) planes; the output size is given. */
struct bg_pool_args {
    int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
    int is_max, count_include_pad;
};

__global__ void bg_pool2d(const float *__restrict__ x, float *__restrict__ y,
                          struct bg_pool_args p)
{
    BG_FOR(i, p.planes * p.oh * p.ow) {
        int64_t ox = i % p.ow, oy = (i / p.ow) % p.oh, plane = i / (p.ow * p.oh);
        const float *xp = x + plane * p.h * p.w;
        float acc = p.is_max ? -INFINITY : 0.0f;
        int64_t count = 0;
        for (int64_t ky = 0; ky < p.kh; ++ky) {
            int64_t iy = oy * p.sh - p.ph + ky * p.dh;
            for (int64_t kx = 0; kx < p.kw; ++kx) {
                int64_t ix = ox * p.sw - p.pw + kx * p.dw;
                int inside = iy >= 0 && iy < p.h && ix >= 0 && ix < p.w;
                /* count_include_pad counts pad cells, not cells past the padded input */
                if (!inside) {
                    if (p.count_include_pad && iy < p.h + p.ph && ix < p.w + p.pw) ++count;
                    continue;
                }
                float v = xp[iy * p.w + ix];
                if (p.is_max) acc = fmaxf(acc, v); else acc += v;
                ++count;
            }
        }
        y[i] = p.is_max ? acc : (count ? acc / (float)count : 0.0f);
    }
}

/* Reduce the middle dim of (outer, n, inner): op 0 sum, 1 mean, 2 max, 3 min, 4 prod,
 * 5 sum of squares, 6 L2 norm, 7 L1 norm, 8 log-sum-exp. */
__global__ void bg_reduce(const float *__restrict__ x, float *__restrict__ y, int64_t outer,
                          int64_t n, int64_t inner, int op)
{
    BG_FOR(i, outer * inner) {
        const float *row = x + (i / inner) * n * inner + i % inner;
        float acc = op == 2 ? -INFINITY : op == 3 ? INFINITY : op == 4 ? 1.0f : 0.0f;
        float top = -INFINITY;
        if (op == 8)
            for (int64_t j = 0; j < n; ++j) top = fmaxf(top, row[j * inner]);
        for (int64_t j = 0; j < n; ++j) {
            float v = row[j * inner];
            switch (op) {
            case 2: acc = fmaxf(acc, v); break;
            case 3: acc = fminf(acc, v); break;
            case 4: acc *= v; break;
            case 5: case 6: acc += v * v; break;
            case 7: acc += fabsf(v); break;
            case 8: acc += expf(v - top); break;
            default: acc += v;
            }
        }
        if (op == 1) acc /= (float)n;
        if (op == 6) acc = sqrtf(acc);
        if (op == 8) acc = top + logf(acc);
        y[i] = acc;
    }
}

/* Softmax (log_softmax = 1: LogSoftmax) of the middle dim of (outer, n, inner). */
__global__ void bg_softmax(const float *__restrict__ x, float *__restrict__ y, int64_t outer,
                           int64_t n, int64_t inner, int log_softmax)
{
    BG_FOR(i, outer * inner) {
        int64_t base = (i / inner) * n * inner + i % inner;
        float top = -INFINITY, sum = 0.0f;
        for (int64_t j = 0; j < n; ++j) top = fmaxf(top, x[base + j * inner]);
        for (int64_t j = 0; j < n; ++j) sum += expf(x[base + j * inner] - top);
        for (int64_t j = 0; j < n; ++j) {
            float d = x[base + j * inner] - top;
            y[base + j * inner] = log_softmax ? d - logf(sum) : expf(d) / sum;
        }
    }
}

/* LayerNormalization over the last n elements of each of `rows` rows: one block per row. */
__global__ void bg_layer_norm(const float *__restrict__ x, const float *__restrict__ scale,
                              const float *__restrict__ bias, float *__restrict__ y,
                              int64_t rows, int64_t n, float epsilon)
{
    __shared__ float part[BG_THREADS];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * n;
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += xr[j];
        part[threadIdx.x] = s;
        __syncthreads();
        for (int w = blockDim.x / 2; w > 0; w /= 2) {
            if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
            __syncthreads();
        }
        float mean = part[0] / (float)n;
        __syncthreads();
        float q = 0.0f;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) q += (xr[j] - mean) * (xr[j] - mean);
        part[threadIdx.x] = q;
        __syncthreads();
        for (int w = blockDim.x / 2; w > 0; w /= 2) {
            if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
            __syncthreads();
        }
        float inv = rsqrtf(part[0] / (float)n + epsilon);
        __syncthreads();
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            float v = (xr[j] - mean) * inv * scale[j];
            y[r * n + j] = bias ? v + bias[j] : v;
        }
    }
}

/* y[i] = x[offset + sum_d index_d(i) * stride_d]: Transpose, Slice (and any other strided
 * view of x) as one gather over the output's dims. */
__global__ void bg_strided_copy(const float *__restrict__ x, float *__restrict__ y,
                                int64_t n, int64_t offset, struct bg_dims d)
{
    BG_FOR(i, n) {
        int64_t src = offset, rest = i;
        for (int k = d.rank - 1; k >= 0; --k) {
            src += (rest % d.size[k]) * d.stride[k];
            rest /= d.size[k];
        }
        y[i] = x[src];
    }
}

/* Gather along an axis: x is (outer, axis_n, inner), indices has `count` entries (negative
 * ones count from the end), y is (outer, count, inner). */
__global__ void bg_gather(const float *__restrict__ x, const int64_t *__restrict__ indices,
                          float *__restrict__ y, int64_t outer, int64_t axis_n, int64_t count,
                          int64_t inner)
{
    BG_FOR(i, outer * count * inner) {
        int64_t in = i % inner, c = (i / inner) % count, o = i / (inner * count);
        int64_t k = indices[c];
        if (k < 0) k += axis_n;
        y[i] = (k >= 0 && k < axis_n) ? x[(o * axis_n + k) * inner + in] : 0.0f;
    }
}

#endif /* BG_CUDA_CUH */
