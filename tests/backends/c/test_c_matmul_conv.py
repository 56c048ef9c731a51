"""MatMul, Gemm, Conv, ConvTranspose and pools (through bg_kernels.h), with fused
epilogues, against onnxruntime."""

from __future__ import annotations

import re

import numpy as np
import pytest
from c_cases import Case, CaseResults, node, rand, run_cases

RNG = np.random.default_rng(11)


def _mm(name: str, a: tuple[int, ...], b: tuple[int, ...]) -> Case:
    return Case(
        name, [node("MatMul", ["a", "b"], ["y"])], {"a": rand(RNG, *a), "b": rand(RNG, *b)}, ["y"]
    )


def _gemm(
    name: str, a: tuple[int, ...], b: tuple[int, ...], c: tuple[int, ...] | None, **attrs: object
) -> Case:
    weights = {"b": rand(RNG, *b)}
    inputs = ["a", "b"]
    if c is not None:
        weights["c"] = rand(RNG, *c)
        inputs.append("c")
    return Case(name, [node("Gemm", inputs, ["y"], **attrs)], {"a": rand(RNG, *a)}, ["y"], weights)


def _conv(
    name: str,
    x: tuple[int, ...],
    w: tuple[int, ...],
    bias: bool = True,
    act: str = "",
    **attrs: object,
) -> Case:
    weights = {"w": rand(RNG, *w, low=-0.5, high=0.5)}
    inputs = ["x", "w"]
    if bias:
        weights["b"] = rand(RNG, w[0])
        inputs.append("b")
    nodes = [node("Conv", inputs, ["c" if act else "y"], **attrs)]
    if act:
        nodes.append(node(act, ["c"], ["y"]))
    return Case(name, nodes, {"x": rand(RNG, *x)}, ["y"], weights)


def _pool(name: str, op: str, x: tuple[int, ...], **attrs: object) -> Case:
    return Case(name, [node(op, ["x"], ["y"], **attrs)], {"x": rand(RNG, *x)}, ["y"])


MATMUL = [
    _mm("mm_2d", (7, 33), (33, 29)),
    _mm("mm_batched_b_shared", (2, 3, 5, 16), (16, 8)),
    _mm("mm_batched_both", (3, 4, 6), (3, 6, 5)),
    _mm("mm_broadcast_batch", (2, 1, 4, 6), (3, 6, 5)),
    _mm("mm_vec_mat", (6,), (2, 6, 5)),
    _mm("mm_mat_vec", (2, 4, 6), (6,)),
    _mm("mm_vec_vec", (9,), (9,)),
    _mm("mm_gemv_n1", (40, 30), (30, 1)),
    Case(
        "mm_add_relu",
        [
            node("MatMul", ["x", "w"], ["h"]),
            node("Add", ["h", "bias"], ["s"]),
            node("Relu", ["s"], ["y"]),
        ],
        {"x": rand(RNG, 2, 5, 12)},
        ["y"],
        {"w": rand(RNG, 12, 10), "bias": rand(RNG, 10)},
    ),
    Case(
        "mm_bias_first_tanh",
        [
            node("MatMul", ["x", "w"], ["h"]),
            node("Add", ["bias", "h"], ["s"]),
            node("Tanh", ["s"], ["y"]),
        ],
        {"x": rand(RNG, 4, 12)},
        ["y"],
        {"w": rand(RNG, 12, 3), "bias": rand(RNG, 1, 3)},
    ),
    Case(
        "mm_clip",
        [node("MatMul", ["x", "w"], ["h"]), node("Clip", ["h", "lo", "hi"], ["y"])],
        {"x": rand(RNG, 4, 12)},
        ["y"],
        {"w": rand(RNG, 12, 6), "lo": np.array(0.0, np.float32), "hi": np.array(1.5, np.float32)},
    ),
]

MATMUL += [
    Case(
        "mm_div_add_relu",
        [
            node("MatMul", ["x", "w"], ["h"]),
            node("Div", ["h", "d"], ["q"]),
            node("Add", ["q", "bias"], ["s"]),
            node("Relu", ["s"], ["y"]),
        ],
        {"x": rand(RNG, 3, 4, 12)},
        ["y"],
        {"w": rand(RNG, 12, 5), "d": np.array(4.0, np.float32), "bias": rand(RNG, 5)},
    ),
    Case(
        "gemm_scaled",
        [node("Gemm", ["x", "w"], ["h"], alpha=2.0), node("Mul", ["s", "h"], ["y"])],
        {"x": rand(RNG, 3, 12)},
        ["y"],
        {"w": rand(RNG, 12, 5), "s": np.array([0.25], np.float32)},
    ),
]

GEMM = [
    _gemm("gemm_plain", (5, 7), (7, 3), None),
    _gemm("gemm_bias_row", (5, 7), (7, 3), (3,)),
    _gemm("gemm_trans_alpha", (7, 5), (3, 7), (1, 3), transA=1, transB=1, alpha=0.5),
    _gemm("gemm_beta_full_c", (5, 7), (7, 3), (5, 3), beta=0.25),
    _gemm("gemm_c_per_row", (5, 7), (7, 3), (5, 1)),
    _gemm("gemm_c_scalar", (5, 7), (7, 3), (1,), beta=2.0),
]

CONV = [
    _conv("conv_basic", (1, 3, 9, 9), (4, 3, 3, 3)),
    _conv("conv_pad_stride", (2, 3, 10, 11), (5, 3, 3, 3), pads=[1, 1, 1, 1], strides=[2, 2]),
    _conv("conv_asym_pad_dil", (1, 2, 12, 12), (3, 2, 3, 2), pads=[2, 0, 1, 1], dilations=[2, 1]),
    _conv("conv_groups", (1, 4, 8, 8), (6, 2, 3, 3), group=2, pads=[1, 1, 1, 1]),
    _conv(
        "conv_depthwise_relu", (1, 6, 8, 8), (6, 1, 3, 3), act="Relu", group=6, pads=[1, 1, 1, 1]
    ),
    _conv("conv_pointwise_nobias", (2, 8, 5, 5), (4, 8, 1, 1), bias=False),
    _conv("conv_same_upper", (1, 3, 7, 7), (2, 3, 4, 4), auto_pad="SAME_UPPER", strides=[2, 2]),
    _conv("conv_same_lower", (1, 3, 7, 7), (2, 3, 4, 4), auto_pad="SAME_LOWER"),
    _conv("conv_valid_sigmoid", (1, 3, 7, 7), (2, 3, 3, 3), act="Sigmoid", auto_pad="VALID"),
    _conv("conv_1d", (2, 3, 20), (4, 3, 5), pads=[2, 2], strides=[2]),
    # HardSwish as the epilogue of each form: the micro-kernel's store (1x1, 3x3), the pixel
    # form (few channels, strided) and the depthwise direct form; inputs cross [-3, 3].
    _conv("conv_pointwise_hardswish", (1, 16, 9, 9), (32, 16, 1, 1), act="HardSwish"),
    _conv("conv_3x3_hardswish", (1, 16, 12, 12), (24, 16, 3, 3), act="HardSwish",
          pads=[1, 1, 1, 1]),
    _conv("conv_pixel_hardswish", (1, 3, 20, 20), (16, 3, 3, 3), act="HardSwish",
          strides=[2, 2], pads=[1, 1, 1, 1]),
    _conv("conv_depthwise_hardswish", (1, 8, 10, 10), (8, 1, 3, 3), act="HardSwish", group=8,
          pads=[1, 1, 1, 1]),
    Case(
        "conv_add_bias_leaky",
        [
            node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            node("Add", ["c", "b"], ["s"]),
            node("LeakyRelu", ["s"], ["y"], alpha=0.1),
        ],
        {"x": rand(RNG, 1, 3, 6, 6)},
        ["y"],
        {"w": rand(RNG, 4, 3, 3, 3), "b": rand(RNG, 1, 4, 1, 1)},
    ),
    Case(
        "conv_transpose",
        [
            node(
                "ConvTranspose",
                ["x", "w", "b"],
                ["y"],
                strides=[2, 2],
                pads=[1, 0, 0, 1],
                output_padding=[1, 1],
            )
        ],
        {"x": rand(RNG, 1, 4, 5, 5)},
        ["y"],
        {"w": rand(RNG, 4, 3, 3, 3), "b": rand(RNG, 3)},
    ),
    Case(
        "conv_transpose_groups_same",
        [node("ConvTranspose", ["x", "w"], ["y"], group=2, strides=[2, 2], auto_pad="SAME_UPPER")],
        {"x": rand(RNG, 2, 4, 3, 4)},
        ["y"],
        {"w": rand(RNG, 4, 2, 3, 3)},
    ),
]

POOL = [
    _pool("maxpool", "MaxPool", (1, 3, 8, 8), kernel_shape=[2, 2], strides=[2, 2]),
    _pool(
        "maxpool_pad_dil",
        "MaxPool",
        (2, 2, 9, 9),
        kernel_shape=[3, 3],
        pads=[1, 1, 1, 1],
        dilations=[2, 2],
    ),
    _pool(
        "maxpool_ceil", "MaxPool", (1, 2, 7, 7), kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1
    ),
    _pool("maxpool_1d", "MaxPool", (1, 2, 9), kernel_shape=[3], strides=[2]),
    _pool("avgpool", "AveragePool", (1, 3, 8, 8), kernel_shape=[3, 3], strides=[1, 1]),
    _pool(
        "avgpool_pad_excl",
        "AveragePool",
        (1, 2, 7, 7),
        kernel_shape=[3, 3],
        pads=[1, 1, 1, 1],
        strides=[2, 2],
    ),
    _pool(
        "avgpool_pad_incl",
        "AveragePool",
        (1, 2, 7, 7),
        kernel_shape=[3, 3],
        pads=[1, 1, 1, 1],
        count_include_pad=1,
    ),
    _pool(
        "avgpool_ceil_incl",
        "AveragePool",
        (1, 2, 8, 8),
        kernel_shape=[3, 3],
        strides=[2, 2],
        pads=[1, 1, 1, 1],
        ceil_mode=1,
        count_include_pad=1,
    ),
    _pool(
        "avgpool_same",
        "AveragePool",
        (1, 2, 7, 7),
        kernel_shape=[3, 3],
        strides=[2, 2],
        auto_pad="SAME_UPPER",
    ),
    _pool("global_avg", "GlobalAveragePool", (2, 3, 5, 6)),
    _pool("global_max", "GlobalMaxPool", (2, 3, 5, 6)),
]

def _conv_bn(name: str, x: tuple[int, ...], w: tuple[int, ...], bias: bool = True,
             act: str = "", stats: str = "weights", **attrs: object) -> Case:
    """Conv -> BatchNormalization (inference) [-> act]. stats: "weights" (foldable) or
    "inputs" (the statistics arrive at run time: the BatchNormalization stays a kernel)."""
    m = w[0]
    weights = {"w": rand(RNG, *w, low=-0.5, high=0.5)}
    conv_inputs = ["x", "w"] + (["b"] if bias else [])
    if bias:
        weights["b"] = rand(RNG, m)
    statistics = {"s": rand(RNG, m), "beta": rand(RNG, m), "mean": rand(RNG, m),
                  "var": rand(RNG, m, low=0.1, high=3.0)}
    feeds = {"x": rand(RNG, *x)}
    (weights if stats == "weights" else feeds).update(statistics)
    nodes = [
        node("Conv", conv_inputs, ["c"], **attrs),
        node("BatchNormalization", ["c", "s", "beta", "mean", "var"], ["n" if act else "y"],
             epsilon=1e-3),
    ]
    if act:
        nodes.append(node(act, ["n"], ["y"]))
    return Case(name, nodes, feeds, ["y"], weights)


CONV_BN = [
    _conv_bn("conv_bn_relu", (1, 3, 9, 9), (8, 3, 3, 3), act="Relu", pads=[1, 1, 1, 1]),
    _conv_bn("conv_nobias_bn", (2, 6, 7, 7), (5, 6, 1, 1), bias=False),
    _conv_bn("conv_bn_depthwise_relu", (1, 6, 9, 9), (6, 1, 3, 3), act="Relu", group=6,
             pads=[1, 1, 1, 1]),
    _conv_bn("conv_bn_pointwise_1x1_plane", (1, 16, 1, 1), (24, 16, 1, 1), act="Sigmoid"),
    _conv_bn("conv_bn_groups_stride", (1, 8, 11, 11), (12, 4, 3, 3), group=2, strides=[2, 2]),
    _conv_bn("conv_bn_stats_at_run_time", (1, 3, 6, 6), (4, 3, 3, 3), stats="inputs"),
]

CASES = MATMUL + GEMM + CONV + POOL + CONV_BN


@pytest.fixture(scope="module")
def results(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return run_cases(CASES, 17, tmp_path_factory.mktemp("c_matmul_conv"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(results: CaseResults, case: Case) -> None:
    results.check(case)


def test_epilogues_are_fused(results: CaseResults) -> None:
    """Bias adds and activations after MatMul/Conv become the bg_epilogue, not loops."""
    text = results.source
    assert "_matmul_add_relu(" in text and ".act = BG_ACT_RELU" in text
    assert "_conv_relu(" in text and "_conv_add_leakyrelu(" in text
    assert ".act = BG_ACT_CLIP, .act_alpha = 0.0f, .act_beta = 1.5f" in text
    assert "_matmul_add_tanh(" in text and ".act = BG_ACT_TANH" in text
    assert text.count(".act = BG_ACT_HARDSWISH") == 4 and "_conv_hardswish(" in text


def test_scalar_scales_fold_into_alpha(results: CaseResults) -> None:
    text = results.source
    # (constant B: packed at create, so the calls are bg_sgemm_prepacked)
    assert "_matmul_div_add_relu(" in text and "bg_sgemm_prepacked(0, 12, 5, 12, 0.25f," in text
    assert "_gemm_mul(" in text and "bg_sgemm_prepacked(0, 3, 5, 12, 0.5f," in text


def test_batched_matmul_with_shared_b_is_one_gemm(results: CaseResults) -> None:
    start = results.source.index("'mm_batched_b_shared.MatMul_0'")
    body = results.source[start : results.source.index("}\n", start)]
    assert "bg_sgemm(0, 0, 30, 8, 16," in body and "for (" not in body


def test_inference_batchnorms_fold_into_the_conv_before_them(results: CaseResults) -> None:
    """A BatchNormalization whose statistics are weights becomes the Conv's epilogue (scale
    and shift computed at create), with the activation after it; names stay on the kernel."""
    text = results.source
    assert "_conv_batchnormalization_relu(" in text
    assert "'conv_bn_relu.BatchNormalization_1'" in text  # the node, named in the kernel
    assert "bg_batchnorm_fold(8, " in text and ".scale = bn" in text
    assert "bg_batchnorm_fold(24, " in text and ".act = BG_ACT_SIGMOID" in text
    # the Conv's own bias goes into the shift; without one the shift is the BN's alone
    assert text.count("bg_batchnorm_fold(") == 5
    assert ", NULL, packed + " in text  # conv_nobias_bn
    # statistics fed at run time: no fold, the BatchNormalization is a kernel of its own
    assert len(re.findall(r"\nstatic void k\d+_batchnormalization\(", text)) == 1
    assert "'conv_bn_stats_at_run_time.BatchNormalization_1'" in text
