"""Elementwise ops (unary, binary with broadcasting, variadic, comparisons, Where, Cast),
one region each, against onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_cases import Case, CaseResults, node, rand, run_cases

RNG = np.random.default_rng(7)


def _unary(op: str, low: float = -3.0, high: float = 3.0, **attrs: object) -> Case:
    name = op.lower() + ("_" + "_".join(f"{k}{v}" for k, v in attrs.items()) if attrs else "")
    return Case(
        name, [node(op, ["x"], ["y"], **attrs)], {"x": rand(RNG, 3, 17, low=low, high=high)}, ["y"]
    )


def _binary(op: str, a: tuple[int, ...], b: tuple[int, ...], name: str, low: float = -2.0) -> Case:
    feeds = {"a": rand(RNG, *a, low=low), "b": rand(RNG, *b, low=low)}
    return Case(name, [node(op, ["a", "b"], ["y"])], feeds, ["y"])


UNARY = [
    _unary(op)
    for op in (
        "Neg",
        "Relu",
        "Sigmoid",
        "Tanh",
        "Erf",
        "Exp",
        "Abs",
        "Floor",
        "Ceil",
        "Sign",
        "HardSwish",
        "Softplus",
        "Softsign",
        "Elu",
        "Selu",
        "Celu",
        "Mish",
        "Round",
        "Sin",
        "Cos",
    )
] + [
    _unary("Log", 0.1, 5.0),
    _unary("Sqrt", 0.0, 5.0),
    _unary("Reciprocal", 0.5, 3.0),
    _unary("LeakyRelu", alpha=0.2),
    _unary("HardSigmoid", alpha=0.3, beta=0.4),
    _unary("Elu", alpha=0.5),
    _unary("Gelu"),
    _unary("Gelu", approximate="tanh"),
    _unary("Clip"),  # opset 20 without bounds: identity
    _unary("ThresholdedRelu", alpha=0.5),
]

BINARY = [
    _binary("Add", (2, 3, 4), (2, 3, 4), "add_same"),
    _binary("Add", (2, 3, 4), (4,), "add_row"),
    _binary("Sub", (2, 3, 4), (3, 1), "sub_col"),
    _binary("Mul", (2, 1, 4), (1, 3, 1), "mul_outer"),
    _binary("Div", (5, 6), (), "div_scalar"),
    _binary("Pow", (4, 5), (5,), "pow", low=0.1),
    _binary("PRelu", (2, 3, 4, 4), (3, 1, 1), "prelu"),
    _binary("Max", (3, 4), (1, 4), "max2"),
]

OTHER = [
    Case(
        "clip_inputs",
        [node("Clip", ["x", "lo", "hi"], ["y"])],
        {"x": rand(RNG, 4, 9)},
        ["y"],
        {"lo": np.array(-0.5, np.float32), "hi": np.array(0.75, np.float32)},
    ),
    Case(
        "clip_runtime_bounds",
        [node("Clip", ["x", "", "hi"], ["y"])],
        {"x": rand(RNG, 4, 9), "hi": np.array(0.25, np.float32)},
        ["y"],
    ),
    Case(
        "variadic",
        [
            node("Sum", ["a", "b", "c"], ["s"]),
            node("Mean", ["a", "b", "c"], ["m"]),
            node("Min", ["a", "b", "c"], ["lo"]),
        ],
        {"a": rand(RNG, 2, 3), "b": rand(RNG, 3), "c": rand(RNG, 2, 1)},
        ["s", "m", "lo"],
    ),
    Case(
        "compare_where",
        [
            node("Less", ["a", "b"], ["lt"]),
            node("Equal", ["a", "a2"], ["eq"]),
            node("Greater", ["a", "b"], ["gt"]),
            node("Where", ["lt", "a", "b"], ["y"]),
        ],
        {"a": rand(RNG, 3, 5), "b": rand(RNG, 5), "a2": rand(RNG, 3, 5)},
        ["lt", "eq", "gt", "y"],
    ),
    Case(
        "int_arith",
        [
            node("Add", ["i", "j"], ["s"]),
            node("Mul", ["s", "j"], ["p"]),
            node("Neg", ["p"], ["n"]),
            node("Max", ["n", "i"], ["y"]),
            node("Cast", ["y"], ["f"], to=1),
        ],
        {
            "i": RNG.integers(-50, 50, (3, 4)).astype(np.int64),
            "j": RNG.integers(-5, 5, (4,)).astype(np.int64),
        },
        ["y", "f"],
    ),
    Case(
        "cast_bool",
        [
            node("Cast", ["x"], ["b"], to=9),
            node("Not", ["b"], ["nb"]),
            node("Cast", ["nb"], ["y"], to=1),
        ],
        {"x": np.array([[0.0, 1.5, -2.0, 0.0]], np.float32)},
        ["y"],
    ),
    Case(
        "scalar_weight_inlined",
        [node("Mul", ["x", "half"], ["h"]), node("Sub", ["h", "neg"], ["y"])],
        {"x": rand(RNG, 6)},
        ["y"],
        {"half": np.array(0.5, np.float32), "neg": np.array([-3.25], np.float32)},
    ),
    Case(
        "pow_constant_exponents",
        [node("Pow", ["x", "two"], ["sq"]), node("Pow", ["x", "three"], ["cube"]),
         node("Pow", ["x", "itwo"], ["isq"])],
        {"x": rand(RNG, 3, 11)},
        ["sq", "cube", "isq"],
        {"two": np.array(2.0, np.float32), "three": np.array([3.0], np.float32),
         "itwo": np.array(2, np.int64)},
    ),
]

CASES = UNARY + BINARY + OTHER


@pytest.fixture(scope="module")
def results(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return run_cases(CASES, 20, tmp_path_factory.mktemp("c_elementwise"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(results: CaseResults, case: Case) -> None:
    results.check(case)


def test_scalar_weights_become_literals(results: CaseResults) -> None:
    assert "x0 * 0.5f" in results.source
    assert "- (-3.25f)" in results.source


def test_squares_and_cubes_multiply(results: CaseResults) -> None:
    """Pow by a constant 2 or 3 is x*x or x*x*x (onnxruntime's own forms), not a powf call
    that keeps its loop scalar; other exponents still call powf."""
    assert "x0 * x0 * x0" in results.source
    assert results.source.count("powf(") == 1  # the "pow" case's tensor exponent


def test_output_is_deterministic(results: CaseResults, tmp_path: Path) -> None:
    again = run_cases(CASES[:3], 20, tmp_path)
    first = run_cases(CASES[:3], 20, tmp_path / "b")
    assert again.source == first.source


# Before opset 11, Clip and Pad take their parameters as attributes.
LEGACY = [
    Case(
        "clip_attrs", [node("Clip", ["x"], ["y"], min=-0.5, max=1.0)], {"x": rand(RNG, 3, 7)}, ["y"]
    ),
    Case("clip_min_only", [node("Clip", ["x"], ["y"], min=0.25)], {"x": rand(RNG, 3, 7)}, ["y"]),
    Case(
        "pad_attrs",
        [node("Pad", ["x"], ["y"], pads=[1, 0, 0, 2], value=0.5)],
        {"x": rand(RNG, 2, 3)},
        ["y"],
    ),
    Case("dropout_inference", [node("Dropout", ["x"], ["y"])], {"x": rand(RNG, 4)}, ["y"]),
]


@pytest.mark.parametrize("case", LEGACY, ids=lambda c: c.name)
def test_opset10_attributes(case: Case, c_toolchain: None, tmp_path: Path) -> None:
    run_cases([case], 10, tmp_path).check(case)
