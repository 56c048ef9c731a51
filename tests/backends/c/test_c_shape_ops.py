"""Views and data movement (Reshape..., Transpose, Concat, Split, Slice, Gather, Expand,
Tile, Pad) against onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_cases import Case, CaseResults, node, rand, run_cases
from c_harness import compile_module, run_partition
from c_ir import F32, I64, ir_graph, ir_node, one_region

from buildgen.backends.c import CBackend

RNG = np.random.default_rng(3)


def i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def _slice(
    name: str,
    shape: tuple[int, ...],
    starts: list[int],
    ends: list[int],
    axes: list[int] | None = None,
    steps: list[int] | None = None,
) -> Case:
    weights = {"s": i64(*starts), "e": i64(*ends)}
    inputs = ["x", "s", "e"]
    if axes is not None:
        weights["a"] = i64(*axes)
        inputs.append("a")
    if steps is not None:
        weights["st"] = i64(*steps)
        inputs.append("st")
    return Case(name, [node("Slice", inputs, ["y"])], {"x": rand(RNG, *shape)}, ["y"], weights)


VIEWS = [
    Case(
        "view_chain",
        [
            node("Reshape", ["x", "shape"], ["r"]),
            node("Relu", ["r"], ["a"]),
            node("Flatten", ["a"], ["f"], axis=1),
            node("Unsqueeze", ["f", "ax"], ["u"]),
            node("Squeeze", ["u", "ax"], ["y"]),
        ],
        {"x": rand(RNG, 2, 12)},
        ["y"],
        {"shape": i64(2, 3, 4), "ax": i64(0)},
    ),
    Case("identity_out", [node("Identity", ["x"], ["y"])], {"x": rand(RNG, 3, 2)}, ["y"]),
    Case(
        "view_both_outputs",
        [node("Relu", ["x"], ["r"]), node("Reshape", ["r", "shape"], ["y"])],
        {"x": rand(RNG, 4, 6)},
        ["r", "y"],
        {"shape": i64(-1)},
    ),
]

MOVE = [
    Case("transpose_default", [node("Transpose", ["x"], ["y"])], {"x": rand(RNG, 2, 3, 4)}, ["y"]),
    Case(
        "transpose_perm",
        [node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])],
        {"x": rand(RNG, 2, 3, 4, 5)},
        ["y"],
    ),
    # Tiled (bg_transpose2d): full 8x8 tiles, edges in both directions, more than one
    # 64-element block, outer loops around the 2-D transposes, and 8- and 1-byte elements.
    Case("transpose_tiled_edges", [node("Transpose", ["x"], ["y"], perm=[0, 2, 1])],
         {"x": rand(RNG, 3, 20, 37)}, ["y"]),
    Case("transpose_tiled_blocks", [node("Transpose", ["x"], ["y"])], {"x": rand(RNG, 70, 136)},
         ["y"]),
    Case("transpose_tiled_nhwc", [node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])],
         {"x": rand(RNG, 2, 16, 9, 11)}, ["y"]),
    Case("transpose_tiled_inner_outer", [node("Transpose", ["x"], ["y"], perm=[2, 1, 0])],
         {"x": rand(RNG, 12, 3, 10)}, ["y"]),
    Case("transpose_tiled_int64", [node("Transpose", ["x"], ["y"])],
         {"x": RNG.integers(-99, 99, (9, 21)).astype(np.int64)}, ["y"]),
    Case("transpose_tiled_bool", [node("Transpose", ["x"], ["y"])],
         {"x": RNG.random((17, 12)) > 0.5}, ["y"]),
    # Moves only dims of 1: imported as a Reshape, a view.
    Case("transpose_unit_dims", [node("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3]),
                                 node("Relu", ["t"], ["y"])], {"x": rand(RNG, 1, 6, 1, 5)},
         ["y"]),
    Case(
        "concat_axis1",
        [node("Concat", ["a", "b", "c"], ["y"], axis=1)],
        {"a": rand(RNG, 2, 3, 4), "b": rand(RNG, 2, 1, 4), "c": rand(RNG, 2, 2, 4)},
        ["y"],
    ),
    # One image: the pieces are contiguous in the result, computed here and read by the
    # Concat alone, so they are written in place and the Concat does not run.
    Case(
        "concat_in_place",
        [node("Relu", ["a"], ["ra"]), node("Sigmoid", ["b"], ["sb"]),
         node("Concat", ["ra", "sb"], ["y"], axis=1), node("Tanh", ["y"], ["z"])],
        {"a": rand(RNG, 1, 3, 4, 4), "b": rand(RNG, 1, 2, 4, 4)},
        ["z"],
    ),
    Case(  # the result is the region's output: the pieces go straight into it
        "concat_in_place_output",
        [node("Relu", ["a"], ["ra"]), node("Sigmoid", ["b"], ["sb"]),
         node("Concat", ["sb", "ra"], ["y"], axis=-3)],
        {"a": rand(RNG, 1, 3, 4, 4), "b": rand(RNG, 1, 2, 4, 4)},
        ["y"],
    ),
    Case(  # y1 is written in place; y2 cannot take y1 (no kernel writes it), so it runs
        "concat_nested",
        [node("Relu", ["a"], ["ra"]), node("Sigmoid", ["b"], ["sb"]),
         node("Concat", ["ra", "sb"], ["y1"], axis=1), node("Tanh", ["c"], ["tc"]),
         node("Concat", ["y1", "tc"], ["y2"], axis=1)],
        {"a": rand(RNG, 1, 3, 4), "b": rand(RNG, 1, 2, 4), "c": rand(RNG, 1, 1, 4)},
        ["y2"],
    ),
    Case(  # ra is read again after the Concat, and two images: both Concats run
        "concat_kept",
        [node("Relu", ["a"], ["ra"]), node("Sigmoid", ["b"], ["sb"]),
         node("Concat", ["ra", "sb"], ["y"], axis=1), node("Add", ["y", "y"], ["z"]),
         node("Neg", ["ra"], ["n"]), node("Concat", ["z", "z"], ["w"], axis=1)],
        {"a": rand(RNG, 2, 3, 4), "b": rand(RNG, 2, 2, 4)},
        ["w", "n"],
    ),
    Case(
        "concat_axis0_int",
        [node("Concat", ["a", "b"], ["y"], axis=0)],
        {"a": i64(1, 2), "b": i64(3, 4, 5)},
        ["y"],
    ),
    Case(
        "split_input",
        [node("Split", ["x", "sp"], ["y0", "y1", "y2"], axis=-1)],
        {"x": rand(RNG, 3, 10)},
        ["y0", "y1", "y2"],
        {"sp": i64(2, 5, 3)},
    ),
    Case(
        "split_even",
        [node("Split", ["x"], ["y0", "y1"], axis=1, num_outputs=2)],
        {"x": rand(RNG, 2, 6, 3)},
        ["y0", "y1"],
    ),
    _slice("slice_basic", (5, 6), [1, 0], [4, 6]),
    _slice("slice_axes_steps", (4, 6, 8), [1, -7], [100, -1], axes=[2, 1], steps=[3, 2]),
    _slice("slice_negative_step", (5, 7), [-1, 5], [-100, 0], axes=[0, 1], steps=[-1, -2]),
    Case(
        "gather_axis0",
        [node("Gather", ["x", "i"], ["y"], axis=0)],
        {"x": rand(RNG, 5, 4)},
        ["y"],
        {"i": i64(4, -1, 0, 2)},
    ),
    Case(
        "gather_axis1_2d_idx",
        [node("Gather", ["x", "i"], ["y"], axis=1)],
        {"x": rand(RNG, 3, 5, 2)},
        ["y"],
        {"i": np.array([[0, -2], [4, 1]], np.int64)},
    ),
    Case(
        "gather_runtime_scalar",
        [node("Gather", ["x", "i"], ["y"], axis=-1)],
        {"x": rand(RNG, 3, 5), "i": np.array(-3, np.int64)},
        ["y"],
    ),
    Case(
        "gather_int32_idx",
        [node("Gather", ["x", "i"], ["y"])],
        {"x": rand(RNG, 6, 3), "i": np.array([5, 0, 5], np.int32)},
        ["y"],
    ),
    Case(
        "expand",
        [node("Expand", ["x", "s"], ["y"])],
        {"x": rand(RNG, 3, 1)},
        ["y"],
        {"s": i64(2, 3, 4)},
    ),
    Case(
        "tile", [node("Tile", ["x", "r"], ["y"])], {"x": rand(RNG, 2, 3)}, ["y"], {"r": i64(2, 3)}
    ),
    Case(
        "pad_constant",
        [node("Pad", ["x", "p", "v"], ["y"])],
        {"x": rand(RNG, 2, 3, 4)},
        ["y"],
        {"p": i64(0, 1, 2, 1, 0, 3), "v": np.array(1.5, np.float32)},
    ),
    Case(
        "pad_negative_default",
        [node("Pad", ["x", "p"], ["y"])],
        {"x": rand(RNG, 4, 5)},
        ["y"],
        {"p": i64(-1, 2, 1, -2)},
    ),
    Case(
        "pad_axes_runtime_value",
        [node("Pad", ["x", "p", "v", "ax"], ["y"])],
        {"x": rand(RNG, 2, 3, 4), "v": np.array(-2.0, np.float32)},
        ["y"],
        {"p": i64(1, 2), "ax": i64(-1)},
    ),
]

CASES = VIEWS + MOVE


@pytest.fixture(scope="module")
def results(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return run_cases(CASES, 18, tmp_path_factory.mktemp("c_shape_ops"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(results: CaseResults, case: Case) -> None:
    results.check(case)


def _region_body(source: str, region: str) -> str:
    start = source.index(f"int BG_EXPORT(cases__c_{region})(")
    return source[start : source.index("\n}\n", start)]


def test_views_are_aliases(results: CaseResults) -> None:
    """Reshape/Flatten/Unsqueeze/Squeeze cost no kernel and no copy: the Relu under the view
    chain writes straight into the region output."""
    body = _region_body(results.source, "r0")
    assert body.count("k0_") == 1 and "k1_" not in body and "memcpy" not in body
    assert "float *view_chain_a = (float *)out[0];" in body


def test_output_views_of_inputs_or_outputs_are_copied(results: CaseResults) -> None:
    """A view of a region input, or of another region output, must fill its own buffer."""
    assert "memcpy(identity_out_y, identity_out_x, 24);" in _region_body(results.source, "r1")
    assert "memcpy(view_both_outputs_y, view_both_outputs_r, 96);" in _region_body(
        results.source, "r2"
    )


def test_a_concat_of_pieces_made_for_it_is_not_run(results: CaseResults) -> None:
    source = results.source
    for case in ("concat_in_place", "concat_in_place_output"):
        assert f"written in place in '{case}.y' (a Concat)" in source  # each piece's pointer
        assert (f"/* Concat '{case}.Concat_2': its pieces were written in place in '{case}.y'"
                " above */") in source  # where it would have run
        assert f" *   Concat '{case}.Concat_2'" not in source  # no kernel for it
    assert "written in place in 'concat_nested.y1'" in source
    assert " *   Concat 'concat_nested.Concat_4'" in source
    assert " *   Concat 'concat_kept.Concat_2'" in source
    assert " *   Concat 'concat_kept.Concat_5'" in source
    assert "written in place in 'concat_kept." not in source


def test_transposes_copy_in_tiles_unless_thin(results: CaseResults) -> None:
    """A transpose with both sides at least 8 long is bg_transpose2d's tiles (under loops
    over the other dims); a thinner one is the plain loop nest; one that moves only dims of
    1 is no kernel at all."""
    source = results.source
    for call in ("bg_transpose2d(X + i0 * 740, Y + i0 * 740, 37, 20, 37, 20, sizeof *X);",
                 "bg_transpose2d(X, Y, 136, 70, 136, 70, sizeof *X);",
                 "bg_transpose2d(X + i0 * 1584, Y + i0 * 1584, 99, 16, 99, 16, sizeof *X);",
                 "bg_transpose2d(X + i0 * 10, Y + i0 * 12, 10, 12, 30, 36, sizeof *X);",
                 "bg_transpose2d(X, Y, 21, 9, 21, 9, sizeof *X);",
                 "bg_transpose2d(X, Y, 12, 17, 12, 17, sizeof *X);"):
        assert call in source
    assert source.count("bg_transpose2d(") == 6  # not transpose_default, transpose_perm
    assert "Transpose 'transpose_unit_dims." not in source
    assert "const float *transpose_unit_dims_t = transpose_unit_dims_x; /* view" in source


def test_slice_opset9_attributes(
    c_toolchain: None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    case = Case(
        "slice9",
        [node("Slice", ["x"], ["y"], starts=[1, -3], ends=[3, 100], axes=[0, 2])],
        {"x": rand(RNG, 4, 2, 5)},
        ["y"],
    )
    run_cases([case], 9, tmp_path_factory.mktemp("c_slice9")).check(case)


def test_gather_index_out_of_range_fails_cleanly(
    c_toolchain: None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    case = Case(
        "gather_oob",
        [node("Gather", ["x", "i"], ["y"])],
        {"x": rand(RNG, 3, 2), "i": i64(0, 3)},
        ["y"],
    )
    with pytest.raises(RuntimeError, match="Gather 'gather_oob.Gather_0': index out of range"):
        run_cases([case], 17, tmp_path_factory.mktemp("c_gather_oob"))


def test_constant_shape_size_from_hand_built_ir(c_toolchain: None, tmp_path: Path) -> None:
    """Constant/Shape/Size never reach the c backend through the importer (it folds them),
    but a graph built another way may hold them."""
    nodes = [
        ir_node("Constant", [], ["c"], value_floats=[1.5, -2.0, 3.25]),
        ir_node("Shape", ["x"], ["s"], start=1),
        ir_node("Size", ["x"], ["n"]),
        ir_node("Add", ["x", "c"], ["y"]),
    ]
    types = {
        "x": (F32, (2, 3)),
        "c": (F32, (3,)),
        "s": (I64, (1,)),
        "n": (I64, ()),
        "y": (F32, (2, 3)),
    }
    graph = ir_graph(nodes, types, ["x"], ["s", "n", "y"])
    partition = one_region(graph)
    source = CBackend().generate("m", graph, partition, {})
    module = compile_module(source, "m", ["r0"], tmp_path)
    x = rand(RNG, 2, 3)
    out = run_partition(module, graph, partition, {}, {"x": x})
    np.testing.assert_array_equal(out["s"], [3])
    np.testing.assert_array_equal(out["n"], 6)
    np.testing.assert_array_equal(out["y"], x + np.array([1.5, -2.0, 3.25], np.float32))

