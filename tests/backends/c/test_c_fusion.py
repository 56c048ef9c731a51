"""Fusion: elementwise chains and trees become one loop nest whose intermediates are never
stored; the numbers stay those of onnxruntime and of the unfused module."""

from __future__ import annotations

import re

import numpy as np
import pytest
from c_cases import Case, CaseResults, node, rand, run_cases

from buildgen.backends.c import CBackend

RNG = np.random.default_rng(23)

CHAIN = Case(
    "chain4",
    [
        node("Mul", ["x", "scale"], ["a"]),
        node("Add", ["a", "bias"], ["b"]),
        node("Sigmoid", ["b"], ["c"]),
        node("Mul", ["c", "x"], ["y"]),
    ],
    {"x": rand(RNG, 2, 3, 8, 8)},
    ["y"],
    {"scale": rand(RNG, 3, 1, 1), "bias": rand(RNG, 8)},
)
GELU = Case(  # erf-GELU as exporters spell it: x feeds two nodes of the same group
    "gelu_tree",
    [
        node("Div", ["x", "sqrt2"], ["d"]),
        node("Erf", ["d"], ["e"]),
        node("Add", ["e", "one"], ["f"]),
        node("Mul", ["x", "f"], ["g"]),
        node("Mul", ["g", "half"], ["y"]),
    ],
    {"x": rand(RNG, 4, 16)},
    ["y"],
    {
        "sqrt2": np.array(1.4142135, np.float32),
        "one": np.array(1.0, np.float32),
        "half": np.array(0.5, np.float32),
    },
)
SHARED = Case(  # t feeds both a group and the region's output: it must be stored
    "shared_intermediate",
    [node("Exp", ["x"], ["t"]), node("Neg", ["t"], ["n"]), node("Relu", ["n"], ["y"])],
    {"x": rand(RNG, 5, 7)},
    ["t", "y"],
)
SOFTMAX_BETWEEN = Case(  # a non-elementwise node splits the chain into two groups
    "split_by_softmax",
    [
        node("Add", ["x", "x"], ["a"]),
        node("Tanh", ["a"], ["b"]),
        node("Softmax", ["b"], ["s"]),
        node("Mul", ["s", "s"], ["m"]),
        node("Sqrt", ["m"], ["y"]),
    ],
    {"x": rand(RNG, 3, 10)},
    ["y"],
)
CASES = [CHAIN, GELU, SHARED, SOFTMAX_BETWEEN]


@pytest.fixture(scope="module")
def fused(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return run_cases(CASES, 17, tmp_path_factory.mktemp("c_fused"))


@pytest.fixture(scope="module")
def unfused(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return run_cases(CASES, 17, tmp_path_factory.mktemp("c_unfused"), CBackend(fuse=False))


def _kernels(source: str) -> list[str]:
    return re.findall(r"^static void (k\d+_\w+)\(", source, flags=re.M)


def _function(source: str, name: str) -> str:
    start = source.index(f"static void {name}(")
    return source[start : source.index("\n}\n", start)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_fused_matches_onnxruntime(fused: CaseResults, case: Case) -> None:
    fused.check(case)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_unfused_matches_onnxruntime(unfused: CaseResults, case: Case) -> None:
    unfused.check(case)


def test_chain_of_four_is_one_loop_nest(fused: CaseResults, unfused: CaseResults) -> None:
    assert _kernels(fused.source)[0] == "k0_mul_add_sigmoid_mul"
    body = _function(fused.source, "k0_mul_add_sigmoid_mul")
    # one nest over [2,3,8,8] (bias varies along W only, so H and W stay apart),
    # 4 statements, one store
    assert body.count("for (") == 4 and "i3 < 8" in body
    assert len(re.findall(r"const float t\d = ", body)) == 4
    assert body.count("Y[") == 1
    # the x leaf is loaded once although two nodes read it
    assert body.count("X0[") == 1
    # unfused: four kernels and three stored intermediates in scratch
    assert [k.split("_", 1)[1] for k in _kernels(unfused.source)[:4]] == [
        "mul",
        "add",
        "sigmoid",
        "mul",
    ]
    region = unfused.source[unfused.source.index("int BG_EXPORT(cases__c_r0)(") :]
    assert region[: region.index("\n}\n")].count("(scratch + ") == 3


def test_tree_with_shared_leaf_and_constants(fused: CaseResults) -> None:
    name = _kernels(fused.source)[1]
    assert name == "k1_div_erf_add_mul"  # repeats collapse: Mul, Mul -> mul
    body = _function(fused.source, name)
    assert "x0 / 1.4142135f" in body and "* 0.5f" in body and "X1" not in body


def test_intermediate_with_outside_consumer_is_stored(fused: CaseResults) -> None:
    assert _kernels(fused.source)[2:4] == ["k2_exp", "k3_neg_relu"]


def test_non_elementwise_node_splits_groups(fused: CaseResults) -> None:
    assert _kernels(fused.source)[4:7] == ["k4_add_tanh", "k5_softmax", "k6_mul_sqrt"]
