"""Zero-sized tensors are values like any other: they import with their static shapes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from onnx_builders import F32, graph_to_onnx, make_model, run_ort, save

from buildgen.errors import BuildgenError
from buildgen.importer import import_model
from buildgen.ir import DType, TensorType


def _split_concat_model():
    """x[2, 5] → Split [5, 0] along 1 → an empty piece; Concat(piece, e[2, 0]) → empty;
    ReduceSum over the empty input's empty axis → [2, 1] of zeros; an out-of-range Slice."""
    nodes = [
        helper.make_node("Split", ["x", "sizes"], ["full", "none"], name="split", axis=1),
        helper.make_node("Concat", ["none", "e"], ["both_empty"], name="concat", axis=1),
        helper.make_node("Relu", ["full"], ["y"], name="relu"),
        helper.make_node("ReduceSum", ["e", "axes"], ["sums"], name="sum", keepdims=1),
        helper.make_node("Slice", ["x", "starts", "ends"], ["sliced"], name="slice"),
    ]
    weights = {
        "sizes": np.array([5, 0], np.int64),
        "axes": np.array([1], np.int64),
        "starts": np.array([10], np.int64),
        "ends": np.array([12], np.int64),
    }
    model = make_model(
        nodes,
        [
            helper.make_tensor_value_info("x", F32, [2, 5]),
            helper.make_tensor_value_info("e", F32, [2, 0]),
        ],
        [
            helper.make_tensor_value_info(name, F32, None)
            for name in ("y", "both_empty", "sums", "sliced")
        ],
        weights,
    )
    return model


def test_empty_tensors_keep_their_static_shapes(tmp_path: Path) -> None:
    model = _split_concat_model()
    result = import_model(save(model, tmp_path), {})
    graph = result.graph
    f32 = DType.FLOAT32
    assert graph.type_of("e") == TensorType(f32, (2, 0))
    assert graph.type_of("none") == TensorType(f32, (2, 0))
    assert graph.type_of("both_empty") == TensorType(f32, (2, 0))
    assert graph.type_of("sums") == TensorType(f32, (2, 1))
    assert graph.type_of("sliced") == TensorType(f32, (0, 5))
    assert graph.type_of("e").nbytes == 0
    assert [o.name for o in graph.outputs] == ["y", "both_empty", "sums", "sliced"]
    # folding and conversion kept the meaning, empty outputs included
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((2, 5)).astype(np.float32), "e": np.zeros((2, 0), np.float32)}
    expected = run_ort(model, feeds)
    actual = run_ort(graph_to_onnx(graph, result.weights_blob), feeds)
    for want, got in zip(expected, actual, strict=True):
        assert want.shape == got.shape
        np.testing.assert_array_equal(got, want)


def test_an_empty_constant_folds_to_an_empty_weight(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Slice", ["c", "starts", "ends"], ["c0"], name="fold_me"),
        helper.make_node("Concat", ["x", "c0"], ["y"], name="concat", axis=0),
    ]
    weights = {
        "c": np.arange(4, dtype=np.float32),
        "starts": np.array([3], np.int64),
        "ends": np.array([3], np.int64),
    }
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [3])],
        [helper.make_tensor_value_info("y", F32, [3])],
        weights,
    )
    graph = import_model(save(model, tmp_path), {}).graph
    assert [n.name for n in graph.nodes] == ["concat"]
    assert graph.weight("c0").type == TensorType(DType.FLOAT32, (0,))


def test_a_zero_dim_is_accepted_only_where_the_model_fixes_it(tmp_path: Path) -> None:
    """Setting a dynamic dim to zero is almost surely a mistake: refused. Repeating the
    zero that the model itself declares is fine."""
    model = make_model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [helper.make_tensor_value_info("x", F32, ["N", 0])],
        [helper.make_tensor_value_info("y", F32, None)],
    )
    path = save(model, tmp_path)
    with pytest.raises(BuildgenError, match="dims must be positive integers, got \\[0, 0\\]"):
        import_model(path, {"x": (0, 0)})
    graph = import_model(path, {"x": (3, 0)}).graph
    assert graph.type_of("y") == TensorType(DType.FLOAT32, (3, 0))
