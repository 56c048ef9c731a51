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
 *                             2^n applied in two steps so denormal results round once
 *   bg_tanhf     1.25 ulp     odd polynomial below 0.625 (Cephes), 1 - 2/(e^2|x| + 1) above
 *   bg_erff      0.82 ulp     fdlibm's four rational approximations, all evaluated and one
 *                             selected (fdlibm's erff splits x so the tail's x*x is exact)
 *   bg_sigmoidf  2.24 ulp     bg_expf of -|x|, one division (exp's error carries through)
 * (the largest error seen; the test's bounds are 1, 1.5, 1, 2.5 ulp)
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

BG_MATH_FN float bg_expf(float x)
{
    /* Clamp first (a NaN becomes 89 here and is restored at the end): exp(89) overflows and
     * exp(-104) underflows to 0, so the clamp changes no result. */
    float xc = x < 89.0f ? x : 89.0f;
    xc = xc > -104.0f ? xc : -104.0f;
    /* n = round(x / ln2) by the 1.5 * 2^23 trick: the sum's low mantissa bits hold n. It is
     * read from the bits, not as (k - shifter): -ffast-math would fold that to x / ln2. */
    const float shifter = 12582912.0f;
    const float k = xc * 1.44269504088896341f + shifter;
    const int32_t ni = (int32_t)(bg__as_bits(k) - bg__as_bits(shifter));
    const float n = (float)ni;
    /* r = x - n ln2 in two steps (0.693359375 has few bits: n * it is exact). */
    const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* 2^n as 2^h * 2^(n-h), h = n/2: both factors are normal for n in [-150, 129]. */
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

/* fdlibm's s_erff.c coefficients (the same as s_erf.c's, rounded to float). */
BG_MATH_FN float bg__erf_small(float x) /* |x| < 0.84375: x + x P(x^2)/Q(x^2) */
{
    const float z = x * x;
    const float r = 1.28379167095512558561e-01f +
                    z * (-3.25042107247001499370e-01f +
                         z * (-2.84817495755985104766e-02f +
                              z * (-5.77027029648944159157e-03f +
                                   z * -2.37630166566501626084e-05f)));
    const float s = 1.0f + z * (3.97917223959155352819e-01f +
                                z * (6.50222499887672944485e-02f +
                                     z * (5.08130628187576562776e-03f +
                                          z * (1.32494738004321644526e-04f +
                                               z * -3.96022827877536812320e-06f))));
    return x + x * (r / s);
}

BG_MATH_FN float bg__erf_mid(float ax) /* 0.84375 <= |x| < 1.25: erx + P(s)/Q(s) */
{
    const float s = ax - 1.0f;
    const float p = -2.36211856075265944077e-03f +
                    s * (4.14856118683748331666e-01f +
                         s * (-3.72207876035701323847e-01f +
                              s * (3.18346619901161753674e-01f +
                                   s * (-1.10894694282396677476e-01f +
                                        s * (3.54783043256182359371e-02f +
                                             s * -2.16637559486879084300e-03f)))));
    const float q = 1.0f + s * (1.06420880400844228286e-01f +
                                s * (5.40397917702171048937e-01f +
                                     s * (7.18286544141962662868e-02f +
                                          s * (1.26171219808761642112e-01f +
                                               s * (1.36370839120290507362e-02f +
                                                    s * 1.19844998467991074170e-02f)))));
    return 8.45062911510467529297e-01f + p / q;
}

BG_MATH_FN float bg__erf_tail(float ax) /* 1.25 <= |x| < 6: 1 - exp(-x^2 - 0.5625 + R/S)/|x| */
{
    const float s = 1.0f / (ax * ax);
    /* 1.25 <= |x| < 1/0.35 */
    const float ra = -9.86494403484714822705e-03f +
                     s * (-6.93858572707181764372e-01f +
                          s * (-1.05586262253232909814e+01f +
                               s * (-6.23753324503260060396e+01f +
                                    s * (-1.62396669462573470355e+02f +
                                         s * (-1.84605092906711035994e+02f +
                                              s * (-8.12874355063065934246e+01f +
                                                   s * -9.81432934416914548592e+00f))))));
    const float sa = 1.0f + s * (1.96512716674392571292e+01f +
                                 s * (1.37657754143519042600e+02f +
                                      s * (4.34565877475229228821e+02f +
                                           s * (6.45387271733267880336e+02f +
                                                s * (4.29008140027567833386e+02f +
                                                     s * (1.08635005541779435134e+02f +
                                                          s * (6.57024977031928170135e+00f +
                                                               s * -6.04244152148580987438e-02f)))))));
    /* 1/0.35 <= |x| < 6 */
    const float rb = -9.86494292470009928597e-03f +
                     s * (-7.99283237680523006574e-01f +
                          s * (-1.77579549177547519889e+01f +
                               s * (-1.60636384855821916062e+02f +
                                    s * (-6.37566443368389627722e+02f +
                                         s * (-1.02509513161107724954e+03f +
                                              s * -4.83519191608651397019e+02f)))));
    const float sb = 1.0f + s * (3.03380607434824582924e+01f +
                                 s * (3.25792512996573918826e+02f +
                                      s * (1.53672958608443695994e+03f +
                                           s * (3.19985821950859553908e+03f +
                                                s * (2.55305040643316442583e+03f +
                                                     s * (4.74528541206955367215e+02f +
                                                          s * -2.24409524465858183362e+01f))))));
    /* both quotients, then a select: a division under a condition would keep the loop
     * from vectorising (the compiler may not speculate an operation that can trap) */
    const float qa = ra / sa, qb = rb / sb;
    const float rs = ax < 2.85714285714285f ? qa : qb;
    /* z = |x| with its low 12 mantissa bits cleared: z*z is exact, (z-x)(z+x) small */
    const float z = bg__as_float(bg__as_bits(ax) & 0xfffff000u);
    const float e = bg_expf(-z * z - 0.5625f) * bg_expf((z - ax) * (z + ax) + rs);
    return 1.0f - e / ax;
}

BG_MATH_FN float bg_erff(float x)
{
    const float ax = fabsf(x);
    /* every branch is computed on a value it is valid for, then one is chosen */
    const float tail = bg__erf_tail(ax < 1.25f ? 1.25f : (ax < 6.0f ? ax : 6.0f));
    const float mid = bg__erf_mid(ax < 1.25f ? ax : 1.0f);
    const float big = ax < 6.0f ? tail : 1.0f;
    const float above = copysignf(ax < 1.25f ? mid : big, x);
    const float small = bg__erf_small(ax < 0.84375f ? x : 0.0f);
    return ax < 0.84375f ? small : (x == x ? above : x);
}

/* GELU as exporters write it: x/2 (1 + erf(x/sqrt(2))), and its tanh approximation. */
BG_MATH_FN float bg_gelu(float x) { return 0.5f * x * (1.0f + bg_erff(x * 0.70710678118654752f)); }
BG_MATH_FN float bg_gelu_tanh(float x)
{
    return 0.5f * x * (1.0f + bg_tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

#endif /* BG_MATH_H */
