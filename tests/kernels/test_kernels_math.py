"""bg_math.h against float64 references over the whole float range, in ulps of the result.

Inputs: every special value (+-0, +-inf, NaN, the smallest denormal, the largest finite),
a dense sweep of the range where each function changes shape, and 2^19 random bit patterns
(every exponent, denormals included). Each build of the harness runs them: AVX2/FMA, the
compiler's default ISA and -O0, so the vectorised loops and the scalar code agree.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import Kernels

EXP, TANH, ERF, SIGMOID = 0, 1, 2, 3
# The documented bounds (bg_math.h's header); measured maxima are printed with -s.
MAX_ULP = {EXP: 1.0, TANH: 1.5, ERF: 1.5, SIGMOID: 2.5}
def _erf(d: np.ndarray) -> np.ndarray:
    return np.array([math.erf(v) for v in d.tolist()], np.float64)


def _reference(which: int, x: np.ndarray) -> np.ndarray:
    # exp overflows; random bit patterns include signalling NaNs, which casts quieten
    with np.errstate(over="ignore", invalid="ignore"):
        d = x.astype(np.float64)
        if which == EXP:
            return np.exp(d)
        if which == TANH:
            return np.tanh(d)
        if which == ERF:
            return _erf(d)
        return 1.0 / (1.0 + np.exp(-d))


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, 2**19, dtype=np.uint64).astype(np.uint32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.17549435e-38,
                        3.4028235e38, -3.4028235e38, 88.72, 88.73, -87.33, -103.97, -104.0,
                        0.625, -0.625, 0.84375, 1.25, 2.857142857, 6.0, -6.0], np.float32)
    sweep = np.linspace(-110, 110, 200_001, dtype=np.float32)
    fine = np.linspace(-8, 8, 200_001, dtype=np.float32)
    return np.concatenate([bits.view(np.float32), special, sweep, fine])


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of the float32 spacing at want (the denormal spacing near 0)."""
    with np.errstate(invalid="ignore", over="ignore"):
        want32 = want.astype(np.float32)
        spacing = np.spacing(np.abs(want32)).astype(np.float64)
        err = np.abs(got.astype(np.float64) - want) / spacing
    same = (got == want32) | (np.isnan(got) & np.isnan(want))
    return np.where(same, 0.0, err)


@pytest.mark.parametrize("which", [EXP, TANH, ERF, SIGMOID], ids=["exp", "tanh", "erf", "sigmoid"])
def test_within_the_documented_ulps_everywhere(kernels_any: Kernels, which: int) -> None:
    x = _inputs()
    got = kernels_any.math(which, x)
    want = _reference(which, x)
    # NaN in, NaN out; and nothing else is NaN.
    assert np.array_equal(np.isnan(got), np.isnan(want))
    # Infinities where the true result overflows float32, and only there.
    overflow = np.abs(want) > np.finfo(np.float32).max
    assert np.array_equal(np.isinf(got), overflow | np.isinf(want))
    finite = ~np.isnan(want) & ~overflow
    ulps = _ulps(got[finite], want[finite])
    worst = int(np.argmax(ulps))
    at = (x[finite][worst], got[finite][worst], want[finite][worst])
    print(f"max {ulps[worst]:.2f} ulp at x = {at[0]!r}")
    assert ulps[worst] <= MAX_ULP[which], at


def test_odd_functions_are_odd_and_signs_of_zero_kept(kernels: Kernels) -> None:
    x = np.array([0.0, -0.0, 1e-40, -1e-40, 0.3, -0.3], np.float32)
    for which in (TANH, ERF):
        got = kernels.math(which, x)
        assert np.array_equal(np.signbit(got), np.signbit(x))
        assert np.array_equal(got[2::2], -got[3::2])


def _fmin_fmax_reference(which: int, x: np.ndarray) -> np.ndarray:
    """What C's fminf(1, fmaxf(0, v)) forms and fmaxf / fminf give (numpy's fmax and fmin
    follow C's: a NaN operand yields the other)."""
    one, zero = np.float32(1), np.float32(0)
    with np.errstate(invalid="ignore", over="ignore"):
        if which == 4:
            return x * np.fmin(one, np.fmax(zero, x * np.float32(1 / 6) + np.float32(0.5)))
        if which == 5:
            return np.fmin(one, np.fmax(zero, np.float32(0.3) * x + np.float32(0.4)))
        return (np.fmax if which == 6 else np.fmin)(x, x[::-1])


@pytest.mark.parametrize("which", [4, 5, 6, 7], ids=["hardswish", "hardsigmoid", "fmax", "fmin"])
def test_selects_give_fmaxf_results_in_vectorisable_form(kernels_any: Kernels, which: int) -> None:
    """bg_hardswishf, bg_hardsigmoidf, bg_fmaxf and bg_fminf (compare-and-select, so loops
    vectorise where fmaxf is a libm call) give the bits the fmaxf/fminf forms give, NaN,
    infinities and signed zeros included."""
    x = _inputs()
    x[np.isnan(x)] = np.nan  # quiet: C's fmaxf(sNaN, y) may return NaN, not y
    got = kernels_any.math(which, x)
    want = _fmin_fmax_reference(which, x).astype(np.float32)
    np.testing.assert_array_equal(got, want)
