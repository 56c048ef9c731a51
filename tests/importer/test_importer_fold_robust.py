"""Constant folding is an optimization, never a reason to fail, and never a reason for a
weights file of hundreds of MB.

- onnx.reference's GatherElements fails on a gathered axis longer than 64 ("cannot reshape
  array of size 1 into shape (1,64)"); any failure of the reference leaves the node in the
  graph for the backends, and the model still builds and matches onnxruntime.
- ConstantOfShape / Expand of small inputs to a large tensor is computed at run time, not
  stored; what reduces such a tensor to something small still folds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx_builders import (
    F32,
    build_models,
    graph_to_onnx,
    library_outputs,
    make_model,
    run_ort,
    save,
)

from buildgen.errors import BuildgenError
from buildgen.importer import fold as fold_module
from buildgen.importer import import_model

RNG = np.random.default_rng(11)


def _gather_elements_model() -> onnx.ModelProto:
    """y = x + GatherElements(data[2,100], indices[2,100], axis=1), both constants."""
    nodes = [
        helper.make_node("GatherElements", ["data", "indices"], ["k"], name="ge", axis=1),
        helper.make_node("Add", ["x", "k"], ["y"], name="add"),
    ]
    weights = {
        "data": RNG.standard_normal((2, 100)).astype(np.float32),
        "indices": RNG.integers(-100, 100, (2, 100)).astype(np.int64),
    }
    return make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [2, 100])],
        [helper.make_tensor_value_info("y", F32, [2, 100])],
        weights,
        name="gather_elements",
    )


BIG_SHAPE = (1, 4200, 1024)  # 17.2 MB of float32: above the folding limit


def _large_constants_model() -> onnx.ModelProto:
    """ConstantOfShape and Expand of small constants to BIG_SHAPE. The first feeds the
    output (kept: computed at run time); the second is reduced to a scalar (folded)."""
    fill = numpy_helper.from_array(np.array([0.5], np.float32), "fill")
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["c"], name="big_fill", value=fill),
        helper.make_node("Add", ["c", "x"], ["cx"], name="add"),
        helper.make_node("Expand", ["row", "shape"], ["e"], name="big_expand"),
        helper.make_node("ReduceMax", ["e"], ["peak"], name="peak", keepdims=0),
        helper.make_node("Mul", ["cx", "peak"], ["y"], name="scale"),
    ]
    weights = {
        "shape": np.array(BIG_SHAPE, np.int64),
        "row": RNG.standard_normal(BIG_SHAPE[-1]).astype(np.float32),
    }
    return make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [1, 1, BIG_SHAPE[-1]])],
        [helper.make_tensor_value_info("y", F32, list(BIG_SHAPE))],
        weights,
        name="large_constants",
    )


def _roundtrip_matches(model: onnx.ModelProto, tmp_path: Path) -> Any:
    """Import, rebuild the IR as ONNX, and compare both with onnxruntime; returns the
    import result."""
    pytest.importorskip("onnxruntime")
    result = import_model(save(model, tmp_path), {})
    feeds = {
        i.name: RNG.standard_normal(i.type.shape).astype(np.float32) for i in result.graph.inputs
    }
    expected = run_ort(model, feeds)
    actual = run_ort(graph_to_onnx(result.graph, result.weights_blob), feeds)
    for ours, theirs in zip(actual, expected, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    return result


def test_a_fold_the_reference_fails_on_leaves_the_node(tmp_path: Path) -> None:
    result = _roundtrip_matches(_gather_elements_model(), tmp_path)
    assert [(n.name, n.op) for n in result.graph.nodes] == [
        ("ge", "GatherElements"), ("add", "Add")
    ]


def test_any_exception_of_the_reference_leaves_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Broken:
        def __init__(self, *args: object) -> None:
            pass

        def run(self, *args: object) -> object:
            raise ZeroDivisionError("a bug in the reference")

    real = fold_module._Evaluator._op_class

    def op_class(self: Any, op_type: str) -> Any:
        return Broken if op_type == "Neg" else real(self, op_type)

    monkeypatch.setattr(fold_module._Evaluator, "_op_class", op_class)
    model = make_model(
        [helper.make_node("Neg", ["c"], ["k"], name="neg"),
         helper.make_node("Mul", ["x", "k"], ["y"], name="mul")],
        [helper.make_tensor_value_info("x", F32, [3])],
        [helper.make_tensor_value_info("y", F32, [3])],
        {"c": np.array([1.0, -2.0, 3.0], np.float32)},
    )
    result = _roundtrip_matches(model, tmp_path)
    assert [n.op for n in result.graph.nodes] == ["Neg", "Mul"]


def test_a_failed_fold_that_a_shape_needed_is_named(tmp_path: Path) -> None:
    """When the unfolded node leaves a shape unknown, the error says why it did not fold."""
    dims = np.zeros(70, np.int64)
    dims[:2] = (4, 6)
    model = make_model(
        [helper.make_node("GatherElements", ["dims", "pick"], ["shape"], name="ge", axis=0),
         helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")],
        [helper.make_tensor_value_info("x", F32, [24])],
        [helper.make_tensor_value_info("y", F32, None)],
        {"dims": dims, "pick": np.array([0, 1], np.int64)},
    )
    with pytest.raises(BuildgenError) as info:
        import_model(save(model, tmp_path), {})
    text = str(info.value)
    assert "without a static shape" in text and "from node 'reshape' (Reshape)" in text
    assert "node 'ge' was not folded: folding it failed: ValueError" in text
    assert "Traceback" not in text


def test_large_results_of_small_constants_are_computed_at_run_time(tmp_path: Path) -> None:
    result = _roundtrip_matches(_large_constants_model(), tmp_path)
    graph = result.graph
    # ConstantOfShape became Expand of its fill value (an op the backends run); the other
    # big tensor was only reduced, so its maximum is a constant and its nodes are gone.
    assert [(n.name, n.op) for n in graph.nodes] == [
        ("big_fill", "Expand"), ("add", "Add"), ("scale", "Mul")
    ]
    assert len(result.weights_blob) < 1024
    assert graph.type_of("peak").shape == () and graph.is_weight("peak")


def test_large_folds_that_do_not_grow_are_kept(tmp_path: Path) -> None:
    """A transposed weight is as big as the weight it replaces: it folds, whatever its size."""
    weight = RNG.standard_normal((1024, 4200)).astype(np.float32)
    model = make_model(
        [helper.make_node("Transpose", ["w"], ["wt"], name="t"),
         helper.make_node("MatMul", ["x", "wt"], ["y"], name="mm")],
        [helper.make_tensor_value_info("x", F32, [1, 4200])],
        [helper.make_tensor_value_info("y", F32, [1, 1024])],
        {"w": weight},
    )
    result = import_model(save(model, tmp_path), {})
    assert [n.op for n in result.graph.nodes] == ["MatMul"]
    assert len(result.weights_blob) == weight.nbytes


def test_both_build_and_match_onnxruntime(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from buildgen.backends.c.registry import op_table

    if "GatherElements" not in op_table():
        pytest.skip("the c backend has no GatherElements yet")
    models = {"gather": _gather_elements_model(), "large": _large_constants_model()}
    done = build_models(tmp_path, {name: (m, {}) for name, m in models.items()})
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert (tmp_path / "build" / "large" / "weights.bin").stat().st_size < 1024
    for name, model in models.items():
        dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        feeds = {"x": RNG.standard_normal(dims).astype(np.float32)}
        (expected,) = run_ort(model, feeds)
        ours = library_outputs(tmp_path, name, "c", feeds)["y"]
        np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6, err_msg=name)


def test_an_invalid_reshape_is_still_an_error(tmp_path: Path) -> None:
    """Not every failed fold is the reference's fault: a Reshape of 6 elements to [4] is
    kept by folding, then refused with what folding said."""
    model = make_model(
        [helper.make_node("Reshape", ["c", "shape"], ["r"], name="bad_reshape"),
         helper.make_node("Add", ["x", "r"], ["y"], name="add")],
        [helper.make_tensor_value_info("x", F32, [4])],
        [helper.make_tensor_value_info("y", F32, [4])],
        {"c": np.ones(6, np.float32), "shape": np.array([4], np.int64)},
    )
    with pytest.raises(BuildgenError) as info:
        import_model(save(model, tmp_path), {})
    text = str(info.value)
    assert "node 'bad_reshape' (Reshape) gives 'r' shape [4] (4 elements) from 'c' of shape " \
        "[6] (6 elements)" in text
    assert "hint: the model is invalid; folding it failed: ValueError: cannot reshape" in text
