"""Pad in every mode (constant, reflect, edge, wrap) and every opset form, against
onnxruntime; reflect wider than the axis against numpy (onnxruntime refuses it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_cases import (
    ATOL,
    RTOL,
    Case,
    CaseResults,
    node,
    rand,
    run_case_without_onnxruntime,
    run_cases,
)
from onnx import TensorProto, helper

from buildgen.errors import BuildgenError

RNG = np.random.default_rng(11)


def i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def _pad(
    name: str, shape: tuple[int, ...], pads: list[int], mode: str, axes: list[int] | None = None
) -> Case:
    weights = {"p": i64(*pads)}
    inputs = ["x", "p"]
    if axes is not None:
        weights["a"] = i64(*axes)
        inputs += ["", "a"]
    return Case(
        name, [node("Pad", inputs, ["y"], mode=mode)], {"x": rand(RNG, *shape)}, ["y"], weights
    )


CASES = [
    # the node tests' layout (they are int32, so the node suite leaves them out)
    *(
        _pad(f"{m}_4d", (1, 3, 4, 5), [0, 0, 1, 1, 0, 0, 1, 1], m)
        for m in ("reflect", "edge", "wrap")
    ),
    # as wide as onnxruntime allows reflect (size - 1); edge and wrap wider than the axis
    _pad("reflect_widest", (2, 5), [1, 4, 1, 4], "reflect"),
    _pad("edge_wide", (3, 2), [4, 0, 0, 5], "edge"),
    _pad("wrap_wide", (3, 2), [0, 5, 7, 3], "wrap"),
    # negative pads crop first; the mode then pads what is left
    *(_pad(f"{m}_crop", (4, 6), [-1, 2, 1, -2], m) for m in ("reflect", "edge", "wrap")),
    _pad("wrap_crop_same_axis", (6,), [-2, 3], "wrap"),
    _pad("reflect_crop_only", (4, 6), [-1, 0, 0, -2], "reflect"),
    # only the middle axis padded: the trailing axes are copied as one block
    _pad("edge_block", (2, 3, 4, 5), [0, 2, 0, 0, 0, 1, 0, 0], "edge"),
    _pad("reflect_axes", (2, 3, 4), [1, 2, 2, 1], "reflect", axes=[-1, 1]),
    _pad("wrap_axes", (2, 3, 4), [3, -1], "wrap", axes=[2]),
    _pad("edge_5d", (1, 2, 3, 2, 3), [0, 0, 1, 0, 2, 0, 1, 2, 1, 0], "edge"),
    _pad("constant_crop", (4, 6), [-1, 2, 1, -2], "constant"),
    Case(  # pads computed by a constant subgraph, folded by the importer
        "pads_subgraph",
        [
            node(
                "Constant", [], ["b"], value=helper.make_tensor("b", TensorProto.INT32, [2], [1, 2])
            ),
            node("Constant", [], ["e"], value_ints=[2, 0]),
            node("Cast", ["b"], ["b64"], to=TensorProto.INT64),
            node("Concat", ["b64", "e"], ["p"], axis=0),
            node("Pad", ["x", "p"], ["y"], mode="reflect"),
        ],
        {"x": rand(RNG, 3, 4)},
        ["y"],
    ),
]


@pytest.fixture(scope="module")
def results(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return run_cases(CASES, 19, tmp_path_factory.mktemp("c_pad"))  # wrap needs opset 19


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(results: CaseResults, case: Case) -> None:
    results.check(case)


def test_pads_subgraph_folds_into_the_kernel(results: CaseResults) -> None:
    """Constant/Cast/Concat fold at import: one Pad kernel, no kernel for the pads."""
    # the region functions follow the kernels
    start = results.source.index("int BG_EXPORT(cases__c_r")
    kernels = results.source[:start]
    assert "Pad 'pads_subgraph.Pad_4'" in kernels
    assert "pads_subgraph.Concat" not in kernels and "pads_subgraph.Cast" not in kernels


OLD_OPSETS = [
    (
        2,
        Case(
            "opset2_reflect",
            [node("Pad", ["x"], ["y"], mode="reflect", pads=[1, 2, 1, 0])],
            {"x": rand(RNG, 3, 4)},
            ["y"],
        ),
    ),
    (
        2,
        Case(
            "opset2_edge_crop",
            [node("Pad", ["x"], ["y"], mode="edge", pads=[-1, 3, 2, -1])],
            {"x": rand(RNG, 3, 4)},
            ["y"],
        ),
    ),
    (
        11,
        Case(
            "opset11_reflect",
            [node("Pad", ["x", "p"], ["y"], mode="reflect")],
            {"x": rand(RNG, 2, 3, 4)},
            ["y"],
            {"p": i64(0, 1, 2, 0, 2, 3)},
        ),
    ),
    (
        11,
        Case(
            "opset11_constant_value",
            [node("Pad", ["x", "p", "v"], ["y"])],
            {"x": rand(RNG, 2, 3), "v": np.array(-3.5, np.float32)},
            ["y"],
            {"p": i64(1, -1, 0, 2)},
        ),
    ),
]


@pytest.mark.parametrize(("opset", "case"), OLD_OPSETS, ids=lambda v: getattr(v, "name", str(v)))
def test_older_opsets(opset: int, case: Case, c_toolchain: None, tmp_path: Path) -> None:
    run_cases([case], opset, tmp_path).check(case)


@pytest.mark.parametrize(
    ("shape", "pad_width"),
    [((4,), [(7, 9)]), ((1, 3), [(2, 1), (3, 7)])],
    ids=["wider_than_axis", "axis_of_one"],
)
def test_reflect_beyond_onnxruntime_follows_numpy(
    shape: tuple[int, ...], pad_width: list[tuple[int, int]], c_toolchain: None, tmp_path: Path
) -> None:
    """onnxruntime refuses reflect pads >= the axis length; the ONNX reference (numpy)
    keeps mirroring, and an axis of one element repeats."""
    pads = [b for b, _ in pad_width] + [e for _, e in pad_width]
    case = _pad("reflect_numpy", shape, pads, "reflect")
    got = run_case_without_onnxruntime(case, 18, tmp_path)["y"]
    want = np.pad(case.feeds["x"], pad_width, mode="reflect")
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_padding_a_cropped_away_axis_is_an_error(c_toolchain: None, tmp_path: Path) -> None:
    case = _pad("edge_of_nothing", (2, 3), [0, -3, 0, 4], "edge")
    with pytest.raises(BuildgenError, match="axis 1 has no element left to edge-pad from"):
        run_case_without_onnxruntime(case, 18, tmp_path)
