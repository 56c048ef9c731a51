/* bg_math.h — exp, tanh, erf, sigmoid and GELU as code the compiler vectorises
 * (part of bg_kernels.h; include that instead).
 *
 * libm's expf/tanhf/erff are calls: a loop over a tensor that calls them stays scalar, and
 * GELU's erff alone was a tenth of the encoder example's time. These are branch-free inline
 * functions (selects, not jumps; bit casts through memcpy; no float-to-int conversion, so no
 * undefined behaviour for NaN or huge inputs), so GCC and Clang vectorise the loops that call
 * them at every ISA level, given -fno-trapping-math (rules/c.yaml): otherwise the compiler may
 * not evaluate both sides of a select and keeps the loop scalar.
 *
 * Accuracy, measured against float64 over the whole float range (every exponent, denormals,
 * +-0, +-inf, NaN) by tests/kernels/test_kernels_math.py:
 *   bg_expf      0.97 ulp     Cephes' degree-6 polynomial after an exact ln2 reduction;
 *                (0.99 FMA)   2^n applied in two steps so denormal results round once
 *   bg_tanhf     1.25 ulp     odd polynomial below 0.625 (Cephes), 1 - 2/(e^2|x| + 1) above
 *   bg_erff      1.11 ulp     x + x R(x^2) below 0.921875, 1 - exp(q(|x|) - x^2) above
 *                (0.99 FMA)
 *   bg_sigmoidf  2.24 ulp     bg_expf of -|x|, one division (exp's error carries through)
 * (the largest error seen; the test's bounds are 1, 1.5, 1.5, 2.5 ulp). The polynomials are
 * evaluated with fused multiply-adds where the ISA has them (BG_MADD), as x86-64-v3 and v4
 * and aarch64 do: half the operations on the chain each element waits for.
 * Special values follow C99 Annex F: exp(-inf) = 0, exp(+inf) = +inf, tanh/erf(+-inf) = +-1,
 * NaN in, NaN out.
 */
#ifndef BG_KERNELS_H
#error "include bg_kernels.h, not bg_math.h"
#endif
#ifndef BG_MATH_H
#define BG_MATH_H

/* Always inlined: a call in a loop keeps the loop scalar, and GCC's size limits declined to
 * inline bg_erff into GELU's loop (half of a ConvNeXt's time went to the calls). */
#define BG_MATH_FN static inline __attribute__((always_inline))

/* a*b + c in one rounding where the ISA has FMA (-std=c11 contracts nothing by itself): a
 * vectorised loop calling __builtin_fmaf becomes vfmadd. Elsewhere fmaf would be a libm
 * call, so it is a multiply and an add there. */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define BG_MADD(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define BG_MADD(a, b, c) ((a) * (b) + (c))
#endif

/* c[0] + c[1] x + ... + c[n-1] x^(n-1) by Horner's rule. n and c are constants at every
 * call: the loop unrolls (at -O2 too, by the pragma: a loop left there keeps the caller's
 * loop scalar) and the coefficients become the instructions' operands. */
BG_MATH_FN float bg__poly(float x, const float *c, int n)
{
    float p = c[n - 1];
#pragma GCC unroll 16
    for (int i = n - 2; i >= 0; --i) p = BG_MADD(p, x, c[i]);
    return p;
}

BG_MATH_FN float bg__as_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

BG_MATH_FN uint32_t bg__as_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* e^x = bg__exp_reduced(x, &n) * 2^n for x in [-104, 89]: n = round(x / ln2) by the
 * 1.5 * 2^23 trick (the sum's low mantissa bits hold n; read from the bits, not as
 * (k - shifter): -ffast-math would fold that to x / ln2), then e^r for r = x - n ln2, taken
 * in two steps (0.693359375 has few bits: n * it is exact). */
BG_MATH_FN float bg__exp_reduced(float x, int32_t *n_out)
{
    const float shifter = 12582912.0f;
    const float k = BG_MADD(x, 1.44269504088896341f, shifter);
    const int32_t ni = (int32_t)(bg__as_bits(k) - bg__as_bits(shifter));
    const float n = (float)ni;
    const float r = BG_MADD(n, 2.12194440e-4f, BG_MADD(n, -0.693359375f, x));
    static const float c[] = {5.0000001201e-1f, 1.6666665459e-1f, 4.1665795894e-2f,
                              8.3334519073e-3f, 1.3981999507e-3f, 1.9875691500e-4f};
    const float p = bg__poly(r, c, 6);
    *n_out = ni;
    return BG_MADD(p * r, r, r) + 1.0f;
}

BG_MATH_FN float bg_expf(float x)
{
    /* Clamp first (a NaN becomes 89 here and is restored at the end): exp(89) overflows and
     * exp(-104) underflows to 0, so the clamp changes no result. */
    float xc = x < 89.0f ? x : 89.0f;
    xc = xc > -104.0f ? xc : -104.0f;
    int32_t ni;
    const float p = bg__exp_reduced(xc, &ni);
    /* 2^n as 2^h * 2^(n-h), h = n/2: both factors are normal for n in [-150, 129], so a
     * denormal result rounds once. */
    const int32_t h = ni / 2;
    const float s1 = bg__as_float((uint32_t)(h + 127) << 23);
    const float s2 = bg__as_float((uint32_t)(ni - h + 127) << 23);
    const float y = p * s1 * s2;
    return x == x ? y : x;
}

BG_MATH_FN float bg_tanhf(float x)
{
    const float ax = fabsf(x);
    /* |x| < 0.625: x + x^3 P(x^2) */
    const float z = x * x;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    const float small = ax + ax * (p * z);
    /* above: 1 - 2 / (e^(2|x|) + 1), which is 1 once e^(2|x|) overflows */
    const float large = 1.0f - 2.0f / (bg_expf(2.0f * ax) + 1.0f);
    return copysignf(ax < 0.625f ? small : large, x); /* odd, and tanh(-0) = -0 */
}

/* 1/(1 + e^-x) for x >= 0; e^x/(1 + e^x) below, so that e^-x never overflows where the
 * result is still a (denormal) float, and no 1 - ... cancels. */
BG_MATH_FN float bg_sigmoidf(float x)
{
    const float e = bg_expf(-fabsf(x));
    return (x < 0.0f ? e : 1.0f) / (1.0f + e);
}

/* erf in two ranges, each one polynomial (fitted for this file: Lawson-weighted least
 * squares towards minimax in float64, then checked in float32 arithmetic with and without
 * FMA contraction). fdlibm's four rational ranges, evaluated all and one selected, cost four
 * divisions and two exps an element and made GELU a fifth of a vision transformer's time;
 * this costs one exp and sixteen multiply-adds.
 *   |x| < 0.921875:  erf(x) = x + x R(x^2), R of degree 6 (fit error 0.007 ulp)
 *   0.921875 <= |x| < 3.925:  erf(x) = 1 - exp(q(|x| - 2) - x^2), q of degree 8 fitted to
 *                    log(erfc(x)) + x^2 (fit error below 0.001 ulp of the result)
 *   |x| >= 3.925:    erf(x) = +-1 (erfc(3.925) is below half an ulp of 1)
 * The rounding of the evaluation, not the fit, makes the error (see the header). */
BG_MATH_FN float bg__erf_small(float x) /* |x| < 0.921875 */
{
    static const float c[] = {1.28379166e-01f, -3.76126349e-01f, 1.12836957e-01f,
                              -2.68593989e-02f, 5.20103192e-03f, -8.14270170e-04f,
                              8.37008993e-05f};
    return BG_MADD(x, bg__poly(x * x, c, 7), x);
}

/* e^x for x in [-18, -1.5], all bg__erf_big asks for: no clamp, no NaN (bg_erff handles
 * those), 2^n in one step (n >= -27: a normal scale). bg_expf's generality cost GELU a
 * third of its time. */
BG_MATH_FN float bg__exp_erfc(float x)
{
    int32_t ni;
    const float p = bg__exp_reduced(x, &ni);
    return p * bg__as_float((uint32_t)(ni + 127) << 23);
}

BG_MATH_FN float bg__erf_big(float ax) /* 0.921875 <= |x| <= 3.925 */
{
    static const float c[] = {-1.36494124e+00f, -4.18160796e-01f, 7.62488991e-02f,
                              -1.64660010e-02f, 3.57092358e-03f, -7.29183957e-04f,
                              1.37908006e-04f, -2.24793257e-05f, -4.37706319e-07f};
    const float q = bg__poly(ax - 2.0f, c, 9);
    return 1.0f - bg__exp_erfc(BG_MADD(-ax, ax, q));
}

BG_MATH_FN float bg_erff(float x)
{
    const float ax = fabsf(x);
    /* both ranges are computed on a value each is valid for, then one is chosen */
    const float big = bg__erf_big(ax < 0.921875f ? 0.921875f : (ax < 3.925f ? ax : 3.925f));
    const float above = copysignf(ax < 3.925f ? big : 1.0f, x);
    const float small = bg__erf_small(ax < 0.921875f ? x : 0.0f);
    return ax < 0.921875f ? small : (x == x ? above : x);
}

/* GELU as exporters write it: x/2 (1 + erf(x/sqrt(2))), and its tanh approximation. */
BG_MATH_FN float bg_gelu(float x) { return 0.5f * x * (1.0f + bg_erff(x * 0.70710678118654752f)); }
BG_MATH_FN float bg_gelu_tanh(float x)
{
    return 0.5f * x * (1.0f + bg_tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

#endif /* BG_MATH_H */
