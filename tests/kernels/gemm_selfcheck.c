/* A self-checking program for bg_sgemm and bg_conv2d, for targets ctypes cannot load: built
 * with a cross compiler and run under the target's emulator (test_kernels_cross.py). It
 * includes harness.c, so each call gets the same misaligned NaN-filled workspace and guard
 * band as the ctypes tests, and compares with a double-precision reference computed here.
 * Prints one line per failure and exits with the number of failures (capped at 100). */
#include "harness.c"

#include <stdio.h>

/* A small deterministic generator (the same numbers on every target). */
static uint32_t rng_state = 12345u;
static float rnd(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)((rng_state >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}
static float *rnd_array(int64_t n)
{
    float *a = malloc((size_t)n * sizeof *a);
    for (int64_t i = 0; i < n; ++i) a[i] = rnd();
    return a;
}

static double act_ref(double v, int act)
{
    switch (act) {
    case BG_ACT_RELU: return v > 0 ? v : 0;
    case BG_ACT_CLIP: return v < -0.5 ? -0.5 : v > 0.5 ? 0.5 : v;
    case BG_ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    default: return v;
    }
}

static int failures = 0;

static void expect_close(const char *what, const float *got, const double *want, int64_t n,
                         double tol)
{
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double err = fabs((double)got[i] - want[i]) / (1.0 + fabs(want[i]));
        if (!(err <= worst)) worst = err, at = i; /* NaN counts as worst */
    }
    if (!(worst <= tol)) {
        ++failures;
        printf("FAIL %s: element %lld is %g, expected %g\n", what, (long long)at,
               (double)got[at], want[at]);
    }
}

/* C = act(alpha * op(A) op(B) + beta * C + bias), bias along bias_axis. */
static void check_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float beta, int act,
                       int bias_axis, int threads, int prepacked)
{
    float *A = rnd_array(M * K), *B = rnd_array(K * N), *C = rnd_array(M * N);
    float *bias = rnd_array(bias_axis ? M : N);
    double *want = malloc((size_t)(M * N) * sizeof *want);
    const float alpha = 0.75f;
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k)
                s += (double)(ta ? A[k * M + i] : A[i * K + k]) *
                     (double)(tb ? B[j * K + k] : B[k * N + j]);
            double v = alpha * s + (beta != 0.0f ? beta * (double)C[i * N + j] : 0.0);
            v += bias[bias_axis ? i : j];
            want[i * N + j] = act_ref(v, act);
        }
    const float act_lo = -0.5f, act_hi = 0.5f;
    int (*const gemm)(int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                      const float *, int64_t, float, float *, int64_t, int, const float *, int,
                      int, float, float, int64_t, int) = prepacked ? h_sgemm_prepacked : h_sgemm;
    const int guard = gemm(ta, tb, M, N, K, alpha, A, ta ? M : K, B, tb ? K : N, beta, C, N, 1,
                           bias, bias_axis, act, act_lo, act_hi, 3, threads);
    char what[160];
    snprintf(what, sizeof what, "sgemm%s ta=%d tb=%d %lldx%lldx%lld beta=%g act=%d axis=%d t=%d",
             prepacked ? "_prepacked" : "", ta, tb, (long long)M, (long long)N, (long long)K,
             (double)beta, act, bias_axis, threads);
    if (guard) ++failures, printf("FAIL %s: wrote past the workspace\n", what);
    expect_close(what, C, want, M * N, 1e-5 * (double)K);
    free(A), free(B), free(C), free(bias), free(want);
}

/* One group-1 convolution NCHW with bias and ReLU against a direct loop. */
static void check_conv(int64_t C, int64_t H, int64_t M, int64_t KH, int64_t stride, int64_t pad,
                       int64_t group, int prepacked)
{
    const int64_t W = H, OH = (H + 2 * pad - KH) / stride + 1, OW = OH, Cg = C / group;
    float *X = rnd_array(C * H * W), *Wt = rnd_array(M * Cg * KH * KH), *bias = rnd_array(M);
    float *Y = malloc((size_t)(M * OH * OW) * sizeof *Y);
    double *want = malloc((size_t)(M * OH * OW) * sizeof *want);
    for (int64_t m = 0; m < M; ++m)
        for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
                double s = bias[m];
                const int64_t g = m / (M / group);
                for (int64_t c = 0; c < Cg; ++c)
                    for (int64_t kh = 0; kh < KH; ++kh)
                        for (int64_t kw = 0; kw < KH; ++kw) {
                            const int64_t ih = oh * stride - pad + kh, iw = ow * stride - pad + kw;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            s += (double)X[((g * Cg + c) * H + ih) * W + iw] *
                                 (double)Wt[((m * Cg + c) * KH + kh) * KH + kw];
                        }
                want[(m * OH + oh) * OW + ow] = act_ref(s, BG_ACT_RELU);
            }
    const int64_t p[] = {1, C, H, W, M, OH, OW, KH, KH, group, stride, stride, 1, 1, pad, pad};
    const int guard = h_conv2d(p, X, Wt, 1, bias, BG_ACT_RELU, 0, 0, Y, 5, prepacked, 2);
    char what[128];
    snprintf(what, sizeof what, "conv2d C=%lld H=%lld M=%lld k=%lld s=%lld p=%lld g=%lld%s",
             (long long)C, (long long)H, (long long)M, (long long)KH, (long long)stride,
             (long long)pad, (long long)group, prepacked ? " prepacked" : "");
    if (guard) ++failures, printf("FAIL %s: wrote past the workspace\n", what);
    expect_close(what, Y, want, M * OH * OW, 1e-5 * (double)(Cg * KH * KH));
    free(X), free(Wt), free(bias), free(Y), free(want);
}

int main(void)
{
    /* Whole 4 x 24 tiles, each ragged width (8, 16, 24 columns and between), ragged rows,
     * several K slices (K > 256), the direct-B path (M <= 16) and several row blocks. */
    static const int64_t shapes[][3] = {{4, 24, 7},   {8, 48, 64},  {5, 9, 3},     {3, 17, 300},
                                        {16, 40, 33}, {17, 23, 31}, {64, 72, 260}, {130, 50, 20},
                                        {2, 2, 1},    {33, 100, 513}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
        for (int variant = 0; variant < 4; ++variant) {
            const int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            const int ta = variant & 1, tb = variant >> 1;
            check_gemm(ta, tb, M, N, K, 0.0f, BG_ACT_RELU, (int)(s % 2), 1, 0);
            check_gemm(ta, tb, M, N, K, 0.5f, (int)(variant % 2 ? BG_ACT_CLIP : BG_ACT_SIGMOID),
                       (int)((s + 1) % 2), 2, variant == 3);
        }
    check_conv(3, 17, 16, 3, 2, 1, 1, 0);
    check_conv(16, 12, 24, 3, 1, 1, 1, 1);
    check_conv(8, 9, 8, 1, 1, 0, 1, 0);
    check_conv(8, 10, 16, 3, 1, 1, 2, 0);
    check_conv(8, 10, 8, 3, 1, 1, 8, 0); /* depthwise */
    if (failures == 0) printf("ok\n");
    return failures < 100 ? failures : 100;
}
