"""GatherElements, ScatterElements (every reduction), Scatter (opset 10) and ScatterND
against onnxruntime; indices are run-time inputs, negative ones count from the end and
out-of-range ones fail the call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_cases import Case, CaseResults, node, rand, run_cases

RNG = np.random.default_rng(13)


def i64(values: list) -> np.ndarray:
    return np.array(values, np.int64)


def _indices(shape: tuple[int, ...], dim: int) -> np.ndarray:
    """Indices into an axis of length `dim`, negative ones included."""
    return RNG.integers(-dim, dim, size=shape).astype(np.int64)


def _gather(name: str, shape: tuple[int, ...], index_shape: tuple[int, ...], axis: int) -> Case:
    feeds = {"x": rand(RNG, *shape), "i": _indices(index_shape, shape[axis])}
    return Case(name, [node("GatherElements", ["x", "i"], ["y"], axis=axis)], feeds, ["y"])


def _scatter(
    name: str,
    shape: tuple[int, ...],
    index_shape: tuple[int, ...],
    axis: int,
    reduction: str = "none",
) -> Case:
    if reduction == "none":
        # distinct targets along the axis (with repeats the last write would win, an order
        # ONNX leaves open): the first entries of a random permutation per line, some of
        # them written as negative indices
        lines = list(index_shape)
        lines[axis] = shape[axis]
        permutations = np.argsort(RNG.random(lines), axis=axis)
        indices = np.take(permutations, range(index_shape[axis]), axis=axis)
        indices -= shape[axis] * RNG.integers(0, 2, size=index_shape)
    else:
        indices = _indices(index_shape, shape[axis])
    feeds = {"x": rand(RNG, *shape), "i": indices, "u": rand(RNG, *index_shape)}
    attrs: dict[str, object] = {"axis": axis}
    if reduction != "none":
        attrs["reduction"] = reduction
    return Case(name, [node("ScatterElements", ["x", "i", "u"], ["y"], **attrs)], feeds, ["y"])


def _scatter_nd(
    name: str, shape: tuple[int, ...], indices: np.ndarray, reduction: str = "none"
) -> Case:
    update_shape = indices.shape[:-1] + shape[indices.shape[-1] :]
    feeds = {"x": rand(RNG, *shape), "i": indices, "u": rand(RNG, *update_shape)}
    attrs = {"reduction": reduction} if reduction != "none" else {}
    return Case(name, [node("ScatterND", ["x", "i", "u"], ["y"], **attrs)], feeds, ["y"])


CASES = [
    _gather("gather_axis0", (3, 4), (2, 4), 0),
    _gather("gather_axis1_smaller", (3, 5), (2, 3), 1),
    _gather("gather_3d_axis_neg", (2, 3, 4), (2, 3, 6), -1),
    _gather("gather_3d_middle", (2, 5, 3), (1, 7, 2), 1),
    _scatter("scatter_axis0", (4, 3), (2, 3), 0),
    _scatter("scatter_3d_axis1", (2, 5, 3), (2, 3, 2), 1),
    *(_scatter(f"scatter_{r}", (3, 4), (3, 6), 1, r) for r in ("add", "mul", "max", "min")),
    _scatter("scatter_add_3d", (2, 3, 4), (2, 5, 4), -2, "add"),
    _scatter_nd("scatter_nd_rows", (4, 3, 2), i64([[0], [-2]])),
    _scatter_nd("scatter_nd_elements", (3, 4), i64([[0, 1], [2, -1], [1, 1]])),
    _scatter_nd("scatter_nd_batched", (3, 4, 2), i64([[[0, 1], [2, 3]], [[1, -1], [0, 0]]])),
    *(
        _scatter_nd(f"scatter_nd_{r}", (3, 4), i64([[1], [1], [-1]]), r)
        for r in ("add", "mul", "max", "min")
    ),
    Case(
        "scatter_nan_max",  # a NaN update lands, a NaN already there gives way
        [node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="max")],
        {
            "x": np.array([[np.nan, 1.0, 2.0, 4.0]], np.float32),
            "i": i64([[0, 1, 2, 3]]),
            "u": np.array([[5.0, np.nan, 1.0, np.nan]], np.float32),
        },
        ["y"],
    ),
]


@pytest.fixture(scope="module")
def results(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return run_cases(CASES, 18, tmp_path_factory.mktemp("c_gather_scatter"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(results: CaseResults, case: Case) -> None:
    results.check(case)


def test_scatter_opset10(c_toolchain: None, tmp_path: Path) -> None:
    case = Case(
        "scatter10",
        [node("Scatter", ["x", "i", "u"], ["y"], axis=1)],
        {"x": rand(RNG, 2, 4), "i": i64([[3, -1], [0, 2]]), "u": rand(RNG, 2, 2)},
        ["y"],
    )
    run_cases([case], 10, tmp_path).check(case)


@pytest.mark.parametrize(
    ("op", "index"),
    [("GatherElements", 3), ("ScatterElements", -4), ("ScatterND", 3)],
)
def test_index_out_of_range_fails_cleanly(
    op: str, index: int, c_toolchain: None, tmp_path: Path
) -> None:
    x = rand(RNG, 3, 3)
    if op == "GatherElements":
        case = Case(
            "oob", [node(op, ["x", "i"], ["y"])], {"x": x, "i": i64([[0, index, 1]])}, ["y"]
        )
    elif op == "ScatterElements":
        feeds = {"x": x, "i": i64([[0, index, 1]]), "u": rand(RNG, 1, 3)}
        case = Case("oob", [node(op, ["x", "i", "u"], ["y"])], feeds, ["y"])
    else:
        feeds = {"x": x, "i": i64([[index]]), "u": rand(RNG, 1, 3)}
        case = Case("oob", [node(op, ["x", "i", "u"], ["y"])], feeds, ["y"])
    with pytest.raises(RuntimeError, match=f"{op} 'oob.{op}_0': index out of range"):
        run_cases([case], 18, tmp_path)
