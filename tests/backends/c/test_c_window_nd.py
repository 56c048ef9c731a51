"""Pooling over 1-D and 3-D windows (bg_*pool3d: two 2-D passes) and ConvTranspose of
every spatial rank, against onnxruntime: pads (also asymmetric), strides, dilations,
ceil_mode, count_include_pad, auto_pad, groups, output_padding and output_shape."""

from __future__ import annotations

import numpy as np
import pytest
from c_cases import Case, CaseResults, node, rand, run_cases

RNG = np.random.default_rng(31)


def _pool(name: str, op: str, x: tuple[int, ...], **attrs: object) -> Case:
    return Case(name, [node(op, ["x"], ["y"], **attrs)], {"x": rand(RNG, *x)}, ["y"])


def _convt(
    name: str, x: tuple[int, ...], w: tuple[int, ...], bias: bool, group: int = 1, **attrs: object
) -> Case:
    weights = {"w": rand(RNG, *w, low=-0.5, high=0.5)}
    if bias:
        weights["b"] = rand(RNG, w[1] * group)  # the weight is (C, M / group, k...)
    inputs = ["x", "w", "b"] if bias else ["x", "w"]
    convt = node("ConvTranspose", inputs, ["y"], group=group, **attrs)
    return Case(name, [convt], {"x": rand(RNG, *x)}, ["y"], weights)


POOL_3D = [
    _pool("max3d", "MaxPool", (1, 2, 6, 7, 8), kernel_shape=[2, 2, 2], strides=[2, 2, 2]),
    _pool(
        "max3d_asym_pads_dil",
        "MaxPool",
        (2, 2, 7, 8, 9),
        kernel_shape=[3, 2, 3],
        pads=[1, 0, 1, 0, 1, 2],
        strides=[2, 1, 2],
        dilations=[1, 2, 1],
    ),
    _pool(
        "max3d_ceil",
        "MaxPool",
        (1, 1, 7, 7, 7),
        kernel_shape=[3, 3, 3],
        strides=[2, 2, 2],
        ceil_mode=1,
    ),
    # rows long enough for the vectorized interior of both passes
    _pool(
        "max3d_wide",
        "MaxPool",
        (1, 2, 3, 4, 70),
        kernel_shape=[2, 2, 3],
        pads=[0, 0, 1, 0, 0, 1],
        strides=[1, 1, 2],
    ),
    _pool(
        "avg3d_pad_exclude",
        "AveragePool",
        (1, 2, 6, 6, 6),
        kernel_shape=[3, 3, 3],
        pads=[1, 1, 1, 1, 1, 1],
        strides=[2, 2, 2],
    ),
    _pool(
        "avg3d_ceil_include",
        "AveragePool",
        (1, 2, 7, 8, 7),
        kernel_shape=[3, 3, 2],
        strides=[2, 2, 2],
        pads=[1, 1, 0, 1, 0, 0],
        ceil_mode=1,
        count_include_pad=1,
    ),
    _pool(
        "avg3d_dil_include",
        "AveragePool",
        (1, 1, 10, 9, 11),
        kernel_shape=[2, 3, 2],
        dilations=[2, 1, 3],
        pads=[1, 1, 1, 1, 0, 1],
        count_include_pad=1,
    ),
    _pool(
        "avg3d_same_upper",
        "AveragePool",
        (1, 2, 5, 6, 7),
        kernel_shape=[3, 3, 3],
        strides=[2, 2, 2],
        auto_pad="SAME_UPPER",
    ),
    _pool(
        "avg1d_include",
        "AveragePool",
        (2, 3, 11),
        kernel_shape=[3],
        strides=[2],
        pads=[1, 1],
        count_include_pad=1,
    ),
]

CONV_TRANSPOSE = [
    _convt("convt1d", (1, 3, 7), (3, 2, 3), True, strides=[2], pads=[1, 0], output_padding=[1]),
    _convt(
        "convt3d",
        (1, 2, 3, 4, 3),
        (2, 3, 3, 2, 3),
        True,
        strides=[2, 1, 2],
        pads=[1, 0, 0, 0, 1, 1],
        dilations=[1, 2, 1],
    ),
    _convt(
        "convt3d_groups_same",
        (1, 4, 3, 3, 3),
        (4, 1, 2, 2, 2),
        False,
        group=2,
        strides=[2, 2, 2],
        auto_pad="SAME_UPPER",
    ),
    _convt(
        "convt3d_output_shape",
        (2, 1, 3, 3, 2),
        (1, 2, 3, 3, 3),
        True,
        strides=[2, 2, 2],
        output_shape=[6, 7, 5],
    ),
]

# Four or more input channels per group: the GEMM and col2im form (conv_transpose.py).
CONV_TRANSPOSE_GEMM = [
    _convt("convt_gemm_1d", (2, 5, 9), (5, 3, 4), True, strides=[3], pads=[2, 1],
           output_padding=[2]),
    # the upsampling of PP-OCR's detector: 2 x 2 kernel, stride 2, taps never overlap
    _convt("convt_gemm_2x2_s2", (1, 8, 6, 7), (8, 8, 2, 2), True, strides=[2, 2]),
    _convt("convt_gemm_2d_overlap_pads_dil", (1, 6, 5, 6), (6, 4, 3, 3), False,
           strides=[2, 1], pads=[1, 2, 0, 1], dilations=[2, 1], output_padding=[1, 0]),
    _convt("convt_gemm_2d_groups_same", (2, 8, 4, 5), (8, 3, 3, 3), True, group=2,
           strides=[2, 2], auto_pad="SAME_LOWER"),
    _convt("convt_gemm_3d_output_shape", (1, 4, 3, 3, 2), (4, 2, 2, 3, 2), True,
           strides=[2, 2, 2], output_shape=[7, 6, 5]),
    # pads larger than a tap's reach: some taps land outside for every input
    _convt("convt_gemm_2d_big_pads", (1, 4, 4, 4), (4, 2, 3, 3), False, pads=[3, 3, 2, 2]),
]

CASES = POOL_3D + CONV_TRANSPOSE + CONV_TRANSPOSE_GEMM


@pytest.fixture(scope="module")
def results(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return run_cases(CASES, 19, tmp_path_factory.mktemp("c_window_nd"))  # dilated AveragePool: 19+


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(results: CaseResults, case: Case) -> None:
    results.check(case)


def test_3d_pools_call_the_two_pass_kernels(results: CaseResults) -> None:
    """3-D pools go through bg_pool3d_params with a planned, checked workspace."""
    text = results.source
    assert "bg_maxpool3d(p, X, Y, ws);" in text and "bg_avgpool3d(p, X, Y, ws);" in text
    assert "bg_pool3d_workspace_bytes(&" in text  # create() checks the plan


def test_conv_transpose_with_channels_runs_as_a_gemm(results: CaseResults) -> None:
    """Four or more input channels per group: bg_sgemm on the instance's pool, then col2im;
    fewer: the scatter loops (no bg_sgemm call in their kernels)."""
    text = results.source
    assert "bg_sgemm(1, 0, 32, 42, 8, 1.0f, W + gi * 256, 32," in text  # convt_gemm_2x2_s2
    assert "o[(i0 * 2 + shift0) * 14 + (i1 * 2 + shift1)] += c[i0 * 7 + i1];" in text
    assert text.count("bg_sgemm(1, 0,") == len(CONV_TRANSPOSE_GEMM)
