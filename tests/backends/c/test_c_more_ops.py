"""Ops added for the ONNX node-test coverage, against onnxruntime: inverse trigonometry,
Swish, Shrink, Mod, CastLike, Hardmax, RMSNormalization,
MeanVarianceNormalization, LpNormalization, DepthToSpace,
SpaceToDepth, LpPool, ReverseSequence, CenterCropPad, Det, EyeLike,
OneHot, TopK and the two losses."""

from __future__ import annotations

import numpy as np
import pytest
from c_cases import Case, CaseResults, node, rand, run_cases

RNG = np.random.default_rng(11)


def _unary(op: str, low: float = -2.0, high: float = 2.0, **attrs: object) -> Case:
    return Case(
        op.lower(),
        [node(op, ["x"], ["y"], **attrs)],
        {"x": rand(RNG, 3, 5, low=low, high=high)},
        ["y"],
    )


def _loss(name: str, op: str, shape: tuple[int, ...], weight: bool, **attrs: object) -> Case:
    c = shape[1]
    target = RNG.integers(0, c, (shape[0], *shape[2:])).astype(np.int64)
    target.flat[1] = -1  # an ignored position where ignore_index=-1
    inputs, weights = ["x", "t"], {}
    if weight:
        inputs.append("w")
        weights["w"] = rand(RNG, c, low=0.2, high=1.5)
    outputs = ["y", "p"] if op == "SoftmaxCrossEntropyLoss" else ["y"]
    return Case(
        name,
        [node(op, inputs, outputs, ignore_index=-1, **attrs)],
        {"x": rand(RNG, *shape), "t": target},
        outputs,
        weights,
    )


def _topk(name: str, shape: tuple[int, ...], k: int, **attrs: object) -> Case:
    x = rand(RNG, *shape)
    x.flat[3] = x.flat[4]  # a tie: the lower index comes first
    return Case(
        name,
        [node("TopK", ["x", "k"], ["v", "i"], **attrs)],
        {"x": x},
        ["v", "i"],
        {"k": np.array([k], np.int64)},
    )


CASES = [
    *(_unary(op, -0.9, 0.9) for op in ("Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh")),
    _unary("Acosh", 1.1, 3.0),
    _unary("Atanh", -0.9, 0.9),
    _unary("Swish", alpha=0.7),
    _unary("Shrink", lambd=0.8, bias=0.3),
    Case(
        "mod_float",
        [node("Mod", ["a", "b"], ["y"], fmod=1)],
        {"a": rand(RNG, 3, 4, low=-9, high=9), "b": rand(RNG, 4, low=1.0, high=3.0)},
        ["y"],
    ),
    Case(
        "mod_int",
        [node("Mod", ["a", "b"], ["y"])],
        {
            "a": RNG.integers(-20, 20, (3, 4)).astype(np.int64),
            "b": np.array([3, -4, 5, -7], np.int64),
        },
        ["y"],
    ),
    Case(
        "castlike",
        [node("CastLike", ["x", "like"], ["y"])],
        {"x": rand(RNG, 2, 3, low=-9, high=9), "like": np.zeros(5, np.int64)},
        ["y"],
    ),
    Case("hardmax", [node("Hardmax", ["x"], ["y"], axis=1)], {"x": rand(RNG, 2, 5, 3)}, ["y"]),
    Case(
        "rmsnorm",
        [node("RMSNormalization", ["x", "s"], ["y"], axis=-2, epsilon=1e-3)],
        {"x": rand(RNG, 2, 3, 4)},
        ["y"],
        {"s": rand(RNG, 3, 4)},
    ),
    Case(
        "lpnorm_l1",
        [node("LpNormalization", ["x"], ["y"], axis=1, p=1)],
        {"x": rand(RNG, 2, 4, 3)},
        ["y"],
    ),
    Case("lpnorm_l2", [node("LpNormalization", ["x"], ["y"])], {"x": rand(RNG, 3, 6)}, ["y"]),
    Case(
        "depth_to_space_dcr",
        [node("DepthToSpace", ["x"], ["y"], blocksize=2)],
        {"x": rand(RNG, 1, 8, 2, 3)},
        ["y"],
    ),
    Case(
        "depth_to_space_crd",
        [node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD")],
        {"x": rand(RNG, 2, 8, 2, 3)},
        ["y"],
    ),
    Case(
        "space_to_depth",
        [node("SpaceToDepth", ["x"], ["y"], blocksize=2)],
        {"x": rand(RNG, 2, 3, 4, 6)},
        ["y"],
    ),
    Case(
        "lppool_2d_pads_strides",
        [node("LpPool", ["x"], ["y"], kernel_shape=[3, 2], pads=[1, 0, 1, 1], strides=[2, 1])],
        {"x": rand(RNG, 2, 3, 5, 4)},
        ["y"],
    ),
    Case(
        "lppool_1d_p3",
        [node("LpPool", ["x"], ["y"], kernel_shape=[2], p=3, auto_pad="SAME_UPPER")],
        {"x": rand(RNG, 1, 2, 5)},
        ["y"],
    ),
    Case(
        "mvn",
        [node("MeanVarianceNormalization", ["x"], ["y"], axes=[0, 2, 3])],
        {"x": rand(RNG, 2, 3, 4, 2)},
        ["y"],
    ),
    Case(
        "mvn_axes",
        [node("MeanVarianceNormalization", ["x"], ["y"], axes=[1])],
        {"x": rand(RNG, 2, 5, 3)},
        ["y"],
    ),
    Case(
        "reverse_sequence_time",
        [node("ReverseSequence", ["x", "n"], ["y"])],
        {"x": rand(RNG, 4, 3, 2), "n": np.array([4, 1, 2], np.int64)},
        ["y"],
    ),
    Case(
        "reverse_sequence_batch",
        [node("ReverseSequence", ["x", "n"], ["y"], batch_axis=0, time_axis=1)],
        {"x": rand(RNG, 3, 5), "n": np.array([0, 5, 3], np.int64)},
        ["y"],
    ),
    Case(
        "center_crop_pad",
        [node("CenterCropPad", ["x", "shape"], ["y"])],
        {"x": rand(RNG, 5, 4, 3)},
        ["y"],
        {"shape": np.array([2, 7, 3], np.int64)},
    ),
    Case(
        "center_crop_pad_axes",
        [node("CenterCropPad", ["x", "shape"], ["y"], axes=[-1, 0])],
        {"x": rand(RNG, 4, 2, 5)},
        ["y"],
        {"shape": np.array([2, 7], np.int64)},
    ),
    Case("det", [node("Det", ["x"], ["y"])], {"x": rand(RNG, 2, 3, 4, 4)}, ["y"]),
    Case(
        "eyelike_k_neg",
        [node("EyeLike", ["x"], ["y"], k=-1, dtype=1)],
        {"x": np.zeros((4, 3), np.int32)},
        ["y"],
    ),
    Case("eyelike_k2", [node("EyeLike", ["x"], ["y"], k=2)], {"x": rand(RNG, 3, 5)}, ["y"]),
    # magika 0.5's input: float bytes one-hot encoded on the last axis. Negative indices
    # count from the end; fractions truncate; out-of-range ones and NaN give rows all "off".
    Case(
        "onehot_float_last",
        [node("OneHot", ["x", "depth", "values"], ["y"])],
        {"x": np.array([[0, 3.7, -1, -6, 6, 2, np.nan, -5.5], [5, 1, -2.2, 9, 0, 4, 1e30, -6.9]],
                       np.float32)},
        ["y"],
        {"depth": np.array(6, np.float32), "values": np.array([-0.5, 2.0], np.float32)},
    ),
    Case(
        "onehot_int_axis1",
        [node("OneHot", ["x", "depth", "values"], ["y"], axis=1)],
        {"x": np.array([[1, -3, 4], [0, 7, -4]], np.int64)},
        ["y"],
        {"depth": np.array([4], np.int64), "values": np.array([0, 1], np.int64)},
    ),
    _topk("topk_last", (3, 7), 3),
    _topk("topk_axis1_smallest", (2, 6, 3), 2, axis=1, largest=0),
    _loss("nll_mean_weight", "NegativeLogLikelihoodLoss", (3, 5, 2), True),
    _loss("nll_none", "NegativeLogLikelihoodLoss", (4, 3), False, reduction="none"),
    _loss("sce_sum", "SoftmaxCrossEntropyLoss", (3, 4, 2, 2), False, reduction="sum"),
    _loss("sce_mean_weight", "SoftmaxCrossEntropyLoss", (5, 4), True),
]


@pytest.fixture(scope="module")
def results(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return run_cases(CASES, 24, tmp_path_factory.mktemp("c_more_ops"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(results: CaseResults, case: Case) -> None:
    results.check(case)
