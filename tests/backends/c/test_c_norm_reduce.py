"""Normalizations (BatchNormalization in both modes), softmax (both opset semantics) and
reductions against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from c_cases import Case, CaseResults, node, rand, run_cases

RNG = np.random.default_rng(5)


def _axes(values: list[int]) -> np.ndarray:
    return np.array(values, np.int64)


def _bn(name: str, shape: tuple[int, ...]) -> Case:
    c = shape[1]
    weights = {
        "s": rand(RNG, c),
        "b": rand(RNG, c),
        "m": rand(RNG, c),
        "v": rand(RNG, c, low=0.1, high=2.0),
    }
    return Case(
        name,
        [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)],
        {"x": rand(RNG, *shape)},
        ["y"],
        weights,
    )


def _bn_training(name: str, shape: tuple[int, ...], used: list[str], **attrs: object) -> Case:
    """training_mode=1: batch statistics. ONNX wants all three outputs named; `used` says
    which are graph outputs (the importer disconnects the others)."""
    c = shape[1]
    weights = {
        "s": rand(RNG, c),
        "b": rand(RNG, c),
        "m": rand(RNG, c),
        "v": rand(RNG, c, low=0.1, high=2.0),
    }
    outputs = ["y", "rm", "rv"]
    bn = node("BatchNormalization", ["x", "s", "b", "m", "v"], outputs, training_mode=1, **attrs)
    x = rand(RNG, *shape, low=-1.0, high=3.0)  # a mean away from 0
    return Case(name, [bn], {"x": x}, used, weights)


def _reduce(
    op: str, shape: tuple[int, ...], axes: list[int] | None, keepdims: int = 1, **attrs: object
) -> Case:
    inputs, weights = ["x"], {}
    if axes is not None:
        inputs.append("axes")
        weights["axes"] = _axes(axes)
    which = "_".join(map(str, axes)) if axes else ("empty" if axes == [] else "all")
    name = f"{op.lower()}_{which}_k{keepdims}"
    low = 0.1 if op in ("ReduceLogSum", "ReduceProd") else -2.0
    return Case(
        name,
        [node(op, inputs, ["y"], keepdims=keepdims, **attrs)],
        {"x": rand(RNG, *shape, low=low)},
        ["y"],
        weights,
    )


def _softmax(op: str, shape: tuple[int, ...], axis: int | None, name: str = "") -> Case:
    attrs = {} if axis is None else {"axis": axis}
    return Case(
        name or f"{op.lower()}_{axis}",
        [node(op, ["x"], ["y"], **attrs)],
        {"x": rand(RNG, *shape, low=-5, high=5)},
        ["y"],
    )


NORM = [
    _bn("bn_4d", (2, 3, 4, 5)),
    _bn("bn_2d", (4, 6)),
    _bn_training("bn_train_4d", (3, 4, 5, 6), ["y", "rm", "rv"], momentum=0.8, epsilon=1e-3),
    _bn_training("bn_train_2d", (8, 5), ["y"]),
    _bn_training("bn_train_3d_mean_only", (2, 3, 7), ["y", "rm"]),
    _bn_training("bn_train_3d_var_only", (2, 3, 7), ["rv", "y"]),
    Case(
        "layernorm_last",
        [node("LayerNormalization", ["x", "s", "b"], ["y"], epsilon=1e-5)],
        {"x": rand(RNG, 2, 3, 16)},
        ["y"],
        {"s": rand(RNG, 16), "b": rand(RNG, 16)},
    ),
    Case(
        "layernorm_axis1_nobias",
        [node("LayerNormalization", ["x", "s"], ["y"], axis=1)],
        {"x": rand(RNG, 3, 4, 5)},
        ["y"],
        {"s": rand(RNG, 4, 5)},
    ),
    Case(
        "layernorm_stats",
        [node("LayerNormalization", ["x", "s"], ["y", "mean", "inv"], axis=-2, epsilon=1e-3)],
        {"x": rand(RNG, 2, 3, 4)},
        ["y", "mean", "inv"],
        {"s": rand(RNG, 3, 4)},
    ),
    Case(
        "instancenorm",
        [node("InstanceNormalization", ["x", "s", "b"], ["y"])],
        {"x": rand(RNG, 2, 3, 4, 4)},
        ["y"],
        {"s": rand(RNG, 3), "b": rand(RNG, 3)},
    ),
    _softmax("Softmax", (3, 4, 5), None),
    _softmax("Softmax", (3, 4, 5), 1),
    _softmax("Softmax", (3, 4, 5), 0),
    _softmax("LogSoftmax", (2, 7), -1),
    _softmax("LogSoftmax", (3, 4, 5), 1),
    # Over a middle axis, in blocks of 64 adjacent lanes and a ragged last one (YOLOv8's
    # DFL head is [1, 16, 4, 2100] over axis 1).
    _softmax("Softmax", (1, 17, 2, 70), 1, "softmax_columns"),
    _softmax("LogSoftmax", (2, 16, 75), 1, "logsoftmax_columns"),
]

REDUCE = [
    _reduce("ReduceMean", (2, 3, 4), [-1]),
    _reduce("ReduceMean", (2, 3, 4), [1], keepdims=0),
    _reduce("ReduceSum", (2, 3, 4, 5), [0, 2]),
    _reduce("ReduceSum", (2, 3, 4), None, keepdims=0),
    _reduce("ReduceSum", (2, 3, 4), [], noop_with_empty_axes=1),
    _reduce("ReduceMax", (3, 5, 2), [1]),
    _reduce("ReduceMin", (3, 5, 2), [0, 2], keepdims=0),
    _reduce("ReduceProd", (3, 4), [1]),
    _reduce("ReduceL1", (3, 4), [0]),
    _reduce("ReduceL2", (3, 4, 2), [1, 2]),
    _reduce("ReduceSumSquare", (3, 4), [1]),
    _reduce("ReduceLogSum", (3, 4), [1]),
    _reduce("ReduceLogSumExp", (3, 4, 5), [2]),
    Case(
        "reducesum_int",
        [node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
        {"x": RNG.integers(-9, 9, (3, 4)).astype(np.int64)},
        ["y"],
        {"axes": _axes([1])},
    ),
    Case("argmax", [node("ArgMax", ["x"], ["y"], axis=1)], {"x": rand(RNG, 3, 6, 2)}, ["y"]),
    Case(
        "argmin_last",
        [node("ArgMin", ["x"], ["y"], axis=-1, keepdims=0, select_last_index=1)],
        {"x": np.round(rand(RNG, 4, 6))},
        ["y"],
    ),
]

OPSET18 = NORM + REDUCE

# Before opset 13, Softmax flattens the input to 2-D at `axis` and normalizes whole rows;
# and ReduceMean takes its axes as an attribute.
OPSET11 = [
    _softmax("Softmax", (2, 3, 4), 1),
    _softmax("Softmax", (2, 3, 4), None),
    _softmax("LogSoftmax", (2, 3, 4), 2),
    Case(
        "reducemean_attr",
        [node("ReduceMean", ["x"], ["y"], axes=[0, 2])],
        {"x": rand(RNG, 2, 3, 4)},
        ["y"],
    ),
]


@pytest.fixture(scope="module")
def results18(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return run_cases(OPSET18, 18, tmp_path_factory.mktemp("c_norm18"))


@pytest.fixture(scope="module")
def results11(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return run_cases(OPSET11, 11, tmp_path_factory.mktemp("c_norm11"))


@pytest.mark.parametrize("case", OPSET18, ids=lambda c: c.name)
def test_opset18_matches_onnxruntime(results18: CaseResults, case: Case) -> None:
    results18.check(case)


@pytest.mark.parametrize("case", OPSET11, ids=lambda c: c.name)
def test_opset11_matches_onnxruntime(results11: CaseResults, case: Case) -> None:
    results11.check(case)
