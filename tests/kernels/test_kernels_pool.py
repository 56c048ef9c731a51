"""bg_maxpool2d / bg_avgpool2d against onnxruntime's MaxPool / AveragePool: pads (also
asymmetric), strides, dilations, ceil_mode and count_include_pad."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from bgk_reference import run_one_node
from conftest import Kernels


@dataclass(frozen=True)
class Pool:
    op: str  # "MaxPool" or "AveragePool"
    h: int
    w: int
    k: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    dil: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right
    ceil_mode: int = 0
    count_include_pad: int = 0
    n: int = 2
    c: int = 3


CASES = {
    "max_2x2_s2": Pool("MaxPool", 8, 9, (2, 2), (2, 2)),
    "max_3x3_s2_pad1": Pool("MaxPool", 14, 14, (3, 3), (2, 2), pads=(1, 1, 1, 1)),
    "max_asym_pads_dil2": Pool("MaxPool", 11, 12, (3, 2), dil=(2, 2), pads=(1, 0, 2, 1)),
    "max_ceil": Pool("MaxPool", 8, 7, (3, 3), (2, 2), ceil_mode=1),
    "max_ceil_pad": Pool("MaxPool", 9, 10, (3, 3), (2, 3), pads=(1, 1, 1, 1), ceil_mode=1),
    "max_global": Pool("MaxPool", 5, 6, (5, 6)),
    "avg_2x2_s2": Pool("AveragePool", 8, 8, (2, 2), (2, 2)),
    "avg_pad_exclude": Pool("AveragePool", 10, 9, (3, 3), pads=(1, 1, 1, 1)),
    "avg_pad_include": Pool("AveragePool", 10, 9, (3, 3), pads=(1, 1, 1, 1), count_include_pad=1),
    "avg_asym_include": Pool(
        "AveragePool", 9, 11, (3, 4), (2, 1), pads=(0, 2, 2, 1), count_include_pad=1
    ),
    "avg_ceil_include": Pool(
        "AveragePool", 6, 6, (3, 3), (2, 2), pads=(1, 1, 1, 1), ceil_mode=1, count_include_pad=1
    ),
    "avg_ceil_nopad_include": Pool(
        "AveragePool", 5, 7, (2, 2), (2, 2), ceil_mode=1, count_include_pad=1
    ),
    "avg_ceil_exclude": Pool("AveragePool", 7, 6, (3, 2), (2, 2), pads=(1, 0, 1, 1), ceil_mode=1),
    "avg_dil2_include": Pool(
        "AveragePool", 12, 10, (3, 3), (1, 2), dil=(2, 2), pads=(2, 2, 1, 2), count_include_pad=1
    ),
    # Rows wide enough for the 4 x 8-lane interior loop, at stride 1 and 2.
    "max_wide_s2": Pool("MaxPool", 6, 83, (3, 3), (2, 2), pads=(1, 1, 1, 1)),
    "max_wide_s1_dil2": Pool("MaxPool", 5, 70, (2, 3), dil=(1, 2), pads=(0, 2, 1, 2)),
    "avg_wide_s2_include": Pool(
        "AveragePool", 6, 81, (3, 3), (2, 2), pads=(1, 1, 1, 1), count_include_pad=1
    ),
    "avg_wide_s1": Pool("AveragePool", 4, 67, (3, 3), pads=(1, 1, 1, 1)),
    "avg_global": Pool("AveragePool", 7, 7, (7, 7)),
    # Stride 1, output the input's size: the separable path (bg__pool_same)
    "max_same_3x3": Pool("MaxPool", 7, 7, (3, 3), pads=(1, 1, 1, 1)),
    "max_same_5x5_sppf": Pool("MaxPool", 20, 20, (5, 5), pads=(2, 2, 2, 2)),
    "max_same_asym": Pool("MaxPool", 6, 9, (3, 4), pads=(0, 3, 2, 0)),
    "max_same_1x3": Pool("MaxPool", 5, 8, (1, 3), pads=(0, 1, 0, 1)),
    "max_same_wider_than_plane": Pool("MaxPool", 3, 4, (5, 7), pads=(2, 3, 2, 3)),
    "avg_same_exclude": Pool("AveragePool", 14, 14, (3, 3), pads=(1, 1, 1, 1)),
    "avg_same_include": Pool("AveragePool", 13, 11, (3, 3), pads=(1, 1, 1, 1),
                             count_include_pad=1),
    "avg_same_asym_include": Pool("AveragePool", 8, 10, (4, 3), pads=(3, 0, 0, 2),
                                  count_include_pad=1),
    "avg_same_5x5": Pool("AveragePool", 32, 32, (5, 5), pads=(2, 2, 2, 2)),
    "avg_same_1x1": Pool("AveragePool", 4, 5, (1, 1)),
}


def run_case(k: Kernels, case: Pool) -> None:
    rng = np.random.default_rng(len(case.op) * 1000 + case.h * 10 + case.w)
    # All negative for MaxPool: padding must never act as a zero.
    x = rng.standard_normal((case.n, case.c, case.h, case.w)).astype(np.float32)
    if case.op == "MaxPool":
        x = (-np.abs(x) - 0.1).astype(np.float32)
    attrs = {
        "kernel_shape": list(case.k),
        "strides": list(case.stride),
        "pads": list(case.pads),
        "ceil_mode": case.ceil_mode,
        "dilations": list(case.dil),
    }
    if case.op == "AveragePool":
        attrs["count_include_pad"] = case.count_include_pad
    ref = run_one_node(case.op, {"x": x}, **attrs)
    oh, ow = ref.shape[2:]
    params = [
        case.n,
        case.c,
        case.h,
        case.w,
        oh,
        ow,
        *case.k,
        *case.stride,
        *case.dil,
        case.pads[0],
        case.pads[1],
        case.pads[2],
        case.pads[3],
    ]
    y = np.full(ref.shape, np.nan, np.float32)
    k.pool2d(params, bool(case.count_include_pad), case.op == "MaxPool", x, y)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_pool2d(kernels_any: Kernels, name: str) -> None:
    run_case(kernels_any, CASES[name])


def test_max_of_a_window_skips_nan_on_either_path(kernels_any: Kernels) -> None:
    """A NaN tap never wins a max (an all-NaN window gives -inf), on the separable "same"
    path (7x7) as on the window rows (strided): the two paths agree on every input."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 2, 7, 7)).astype(np.float32)
    x[0, 0, 2, 3] = np.nan
    x[0, 1, :2, :2] = np.nan  # the corner window (0, 0) is NaN alone
    for stride, out in ((1, 7), (2, 4)):
        params = [1, 2, 7, 7, out, out, 3, 3, stride, stride, 1, 1, 1, 1, 1, 1]
        y = np.zeros((1, 2, out, out), np.float32)
        k_pool = kernels_any.pool2d
        k_pool(params, False, True, x, y)
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=np.nan)
        for c in range(2):
            for i in range(out):
                for j in range(out):
                    window = padded[0, c, i * stride:i * stride + 3, j * stride:j * stride + 3]
                    taps = window[~np.isnan(window)]
                    want = taps.max() if taps.size else -np.inf
                    assert y[0, c, i, j] == want, (stride, c, i, j)
