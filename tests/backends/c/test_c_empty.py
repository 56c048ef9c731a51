"""Empty tensors (a zero dim) in the c backend, against onnxruntime.

Nodes that write only empty tensors generate no code; nodes that make non-empty results
from empty inputs (a reduction over an empty axis, a concatenation with an empty piece) or
split off an empty piece compute the non-empty part and never touch the empty one.
"""

from __future__ import annotations

import numpy as np
import pytest
from c_cases import Case, CaseResults, node, rand, run_cases

RNG = np.random.default_rng(23)


def _empty(*shape: int) -> np.ndarray:
    return np.zeros(shape, np.float32)


def _reduce_empty_axis(op: str) -> Case:
    return Case(
        f"{op.lower()}_empty_axis",
        [node(op, ["x", "axes"], ["y"], keepdims=1)],
        {"x": _empty(2, 0, 3)},
        ["y"],
        {"axes": np.array([1], np.int64)},
    )


# ReduceMean is left out: the spec leaves the mean of nothing undefined (onnxruntime says
# 0, the ONNX reference NaN, and so does buildgen: 0 / 0); see test_mean_of_nothing.
REDUCE_OPS = (
    *("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2"),
    *("ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"),
)

CASES = [
    *(_reduce_empty_axis(op) for op in REDUCE_OPS),
    Case(
        "reduce_int_empty_axis",
        [node("ReduceMax", ["x", "axes"], ["y"], keepdims=0)],
        {"x": np.zeros((3, 0), np.int64)},
        ["y"],
        {"axes": np.array([1], np.int64)},
    ),
    Case(  # the kept axis is empty: the output is empty too, nothing runs
        "reduce_empty_kept_axis",
        [node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)],
        {"x": _empty(2, 0, 3)},
        ["y"],
        {"axes": np.array([2], np.int64)},
    ),
    Case(
        "concat_empty_piece",
        [node("Relu", ["e"], ["r"]), node("Concat", ["x", "r", "x"], ["y"], axis=1)],
        {"x": rand(RNG, 2, 3), "e": _empty(2, 0)},
        ["y"],
    ),
    Case(
        "split_empty_piece",
        [
            node("Split", ["x", "sizes"], ["a", "b", "c"], axis=1),
            node("Neg", ["b"], ["nb"]),
        ],
        {"x": rand(RNG, 2, 5)},
        ["a", "nb", "c"],
        {"sizes": np.array([2, 0, 3], np.int64)},
    ),
    Case(  # a rotary-embedding style round trip: split off nothing, then put it back
        "split_concat_round_trip",
        [
            node("Split", ["x", "sizes"], ["head", "rest"], axis=-1),
            node("Mul", ["head", "two"], ["scaled"]),
            node("Concat", ["scaled", "rest"], ["y"], axis=-1),
        ],
        {"x": rand(RNG, 2, 3, 4)},
        ["y"],
        {"sizes": np.array([4, 0], np.int64), "two": np.array(2.0, np.float32)},
    ),
    Case(
        "elementwise_and_view_of_empty",
        [
            node("Add", ["e", "x"], ["s"]),
            node("Reshape", ["s", "shape"], ["y"], allowzero=1),
        ],
        {"e": _empty(0, 3), "x": rand(RNG, 1, 3)},
        ["y"],
        {"shape": np.array([3, 0], np.int64)},
    ),
    Case(
        "slice_out_of_range",
        [node("Slice", ["x", "starts", "ends"], ["y"])],
        {"x": rand(RNG, 4, 5)},
        ["y"],
        {"starts": np.array([7], np.int64), "ends": np.array([9], np.int64)},
    ),
    Case(
        "matmul_no_rows",
        [node("MatMul", ["a", "b"], ["y"])],
        {"a": _empty(0, 6), "b": rand(RNG, 6, 4)},
        ["y"],
    ),
]


@pytest.fixture(scope="module")
def results(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return run_cases(CASES, 18, tmp_path_factory.mktemp("c_empty"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(results: CaseResults, case: Case) -> None:
    results.check(case)


def _signature(source: str, node_name: str) -> str:
    """The parameter list of the kernel function that implements node `node_name`."""
    start = source.index(f"'{node_name}':")
    head = source.index("static ", start)
    return source[source.index("(", head) : source.index(")", head) + 1]


def test_nodes_that_write_only_empty_tensors_generate_no_code(results: CaseResults) -> None:
    for skipped in (
        "reduce_empty_kept_axis.ReduceSum_0",
        "concat_empty_piece.Relu_0",
        "split_empty_piece.Neg_1",
        "elementwise_and_view_of_empty.Add_0",
        "slice_out_of_range.Slice_0",
        "matmul_no_rows.MatMul_0",
    ):
        assert f"'{skipped}'" not in results.source, skipped


def test_empty_pieces_are_never_bound(results: CaseResults) -> None:
    """Only non-empty tensors reach a kernel: an empty one's pointer may be NULL."""
    concat = _signature(results.source, "concat_empty_piece.Concat_1")
    assert "X0" in concat and "X2" in concat and "X1" not in concat
    split = _signature(results.source, "split_empty_piece.Split_0")
    assert "Y0" in split and "Y2" in split and "Y1" not in split
    assert _signature(results.source, "reducesum_empty_axis.ReduceSum_0") == ("(float *restrict Y)")


def test_mean_of_nothing(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> None:
    case = _reduce_empty_axis("ReduceMean")
    results = run_cases([case], 18, tmp_path_factory.mktemp("c_empty_mean"))
    got = results.actual[f"{case.name}.y"]
    assert got.shape == (2, 1, 3) and np.isnan(got).all()
