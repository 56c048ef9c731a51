"""User-facing import errors: each names what is wrong and where to fix it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_builders import F32, make_model, mlp, save

from buildgen.errors import BuildgenError
from buildgen.importer import import_model


def _two_input_model(tmp_path: Path) -> Path:
    nodes = [helper.make_node("Add", ["tokens", "mask"], ["y"])]
    model = make_model(
        nodes,
        [
            helper.make_tensor_value_info("tokens", F32, ["B", "T"]),
            helper.make_tensor_value_info("mask", F32, ["B", 1]),
        ],
        [helper.make_tensor_value_info("y", F32, ["B", "T"])],
    )
    return save(model, tmp_path)


def test_unknown_input_name_is_named_with_a_suggestion(tmp_path: Path) -> None:
    path = _two_input_model(tmp_path)
    with pytest.raises(BuildgenError) as info:
        import_model(path, {"token": (1, 4), "mask": (1, 1)}, model_name="bert")
    text = str(info.value)
    assert "models.bert.inputs: 'token' is not an input" in text
    assert "'tokens', 'mask'" in text
    assert "did you mean 'tokens'?" in text


def test_rank_mismatch_is_an_error(tmp_path: Path) -> None:
    model, _ = mlp()
    with pytest.raises(BuildgenError, match=r"input 'x' has rank 2 .* \[8\] has rank 1"):
        import_model(save(model, tmp_path), {"x": (8,)})


def test_fixed_dim_conflict_is_an_error(tmp_path: Path) -> None:
    model, _ = mlp()
    with pytest.raises(BuildgenError, match="input 'x' dim 1 is fixed to 16 .*, not 15"):
        import_model(save(model, tmp_path), {"x": (8, 15)})


def test_non_positive_dims_are_rejected(tmp_path: Path) -> None:
    model, _ = mlp()
    path = save(model, tmp_path)
    for dims in [(0, 16), (True, 16), (2.0, 16)]:
        with pytest.raises(BuildgenError, match="dims must be positive integers"):
            import_model(path, {"x": dims})  # type: ignore[dict-item]
    # numpy integers (e.g. from a shape computed in Python) are integers
    assert import_model(path, {"x": (np.int64(3), 16)}).graph.inputs[0].type.shape == (3, 16)


def test_every_still_dynamic_input_is_listed(tmp_path: Path) -> None:
    path = _two_input_model(tmp_path)
    with pytest.raises(BuildgenError) as info:
        import_model(path, {}, model_name="bert")
    text = str(info.value)
    assert "inputs with dynamic dims: 'tokens' [B, T], 'mask' [B, 1]" in text
    assert "set it under models.bert.inputs" in text


def test_model_name_defaults_to_the_file_stem(tmp_path: Path) -> None:
    model, _ = mlp()
    with pytest.raises(BuildgenError, match=r"models\.tiny\.inputs"):
        import_model(save(model, tmp_path, "tiny.onnx"), {})


@pytest.mark.parametrize(
    ("elem", "dtype_name"),
    [
        (TensorProto.FLOAT16, "float16"),
        (TensorProto.DOUBLE, "double"),
        (TensorProto.UINT8, "uint8"),
    ],
)
def test_unsupported_input_dtype_names_tensor_and_dtype(
    tmp_path: Path, elem: int, dtype_name: str
) -> None:
    nodes = [helper.make_node("Relu" if elem != TensorProto.UINT8 else "Identity", ["x"], ["y"])]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", elem, [2])],
        [helper.make_tensor_value_info("y", elem, [2])],
    )
    with pytest.raises(BuildgenError) as info:
        import_model(save(model, tmp_path), {})
    text = str(info.value)
    assert f"tensor 'x' has dtype {dtype_name}, tensor 'y' has dtype {dtype_name}; " in text
    assert "buildgen supports float32, int64, int32 and bool" in text


def test_unsupported_weight_dtype_names_the_weight(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Cast", ["x"], ["x64"], to=TensorProto.DOUBLE),
        helper.make_node("Add", ["x64", "bias"], ["s"]),
        helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [2])],
        [helper.make_tensor_value_info("y", F32, [2])],
        {"bias": np.ones(2, np.float64)},
    )
    with pytest.raises(
        BuildgenError,
        match="'x64' has dtype double, tensor 's' has dtype double, tensor 'bias' has dtype double",
    ):
        import_model(save(model, tmp_path), {})


def test_unsupported_dtype_folded_away_is_fine(tmp_path: Path) -> None:
    # A float16 initializer cast to float32 folds into a float32 weight.
    nodes = [
        helper.make_node("Cast", ["w16"], ["w"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "w"], ["y"]),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [3])],
        [helper.make_tensor_value_info("y", F32, [3])],
        {"w16": np.array([1, 2, 3], np.float16)},
    )
    graph = import_model(save(model, tmp_path), {}).graph
    assert [w.name for w in graph.weights] == ["w"]


def test_data_dependent_shape_is_reported(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("NonZero", ["x"], ["idx"], name="nz"),
        helper.make_node("Cast", ["idx"], ["y"], to=TensorProto.FLOAT),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [4])],
        [helper.make_tensor_value_info("y", F32, [1, None])],
    )
    with pytest.raises(BuildgenError, match=r"'idx' \[1, \?\] from node 'nz' \(NonZero\)"):
        import_model(save(model, tmp_path), {})


def test_loops_are_rejected_clearly(tmp_path: Path) -> None:
    """(An If is flattened: tests/importer/test_importer_branches.py.)"""
    body = helper.make_graph(
        [helper.make_node("Identity", ["carried"], ["carried_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("carried", F32, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("carried_out", F32, [2])],
    )
    nodes = [helper.make_node("Loop", ["trips", "", "x"], ["y"], name="loopy", body=body)]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [2])],
        [helper.make_tensor_value_info("y", F32, [2])],
        {"trips": np.array(3, np.int64)},
    )
    with pytest.raises(BuildgenError, match="node 'loopy' \\(Loop\\) repeats a subgraph"):
        import_model(save(model, tmp_path), {})


def test_undefined_tensor_and_cycle_are_errors(tmp_path: Path) -> None:
    undefined = make_model(
        [helper.make_node("Relu", ["nowhere"], ["y"], name="r")],
        [helper.make_tensor_value_info("x", F32, [2])],
        [helper.make_tensor_value_info("y", F32, [2])],
    )
    with pytest.raises(BuildgenError, match="node 'r' \\(Relu\\) reads 'nowhere'"):
        import_model(save(undefined, tmp_path, "a.onnx"), {})
    cycle = make_model(
        [
            helper.make_node("Add", ["x", "b"], ["a"], name="p"),
            helper.make_node("Relu", ["a"], ["b"], name="q"),
        ],
        [helper.make_tensor_value_info("x", F32, [2])],
        [helper.make_tensor_value_info("b", F32, [2])],
    )
    with pytest.raises(BuildgenError, match="cycle through nodes 'p', 'q'"):
        import_model(save(cycle, tmp_path, "b.onnx"), {})


def test_missing_or_broken_file(tmp_path: Path) -> None:
    with pytest.raises(BuildgenError, match="cannot read ONNX file"):
        import_model(tmp_path / "absent.onnx", {})
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\xff\x00 definitely not protobuf")
    with pytest.raises(BuildgenError, match="not a valid ONNX model"):
        import_model(broken, {})


def test_inconsistent_model_fails_shape_inference(tmp_path: Path) -> None:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [2, 3])],
        [helper.make_tensor_value_info("y", F32, [2, 4])],
        {"w": np.ones((5, 4), np.float32)},
    )
    with pytest.raises(BuildgenError, match="ONNX shape inference failed"):
        import_model(save(model, tmp_path), {})


def test_constant_folding_failure_names_the_node(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Reshape", ["c", "bad_shape"], ["r"], name="bad_reshape"),
        helper.make_node("Add", ["x", "r"], ["y"]),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [4])],
        [helper.make_tensor_value_info("y", F32, [4])],
        {"c": np.ones(6, np.float32), "bad_shape": np.array([4], np.int64)},
    )
    # ONNX shape inference does not check Reshape's element count; folding is where it shows.
    with pytest.raises(BuildgenError, match="'bad_reshape' \\(Reshape\\)"):
        import_model(save(model, tmp_path), {})


def test_missing_outputs_are_user_errors(tmp_path: Path) -> None:
    no_outputs = make_model(
        [helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", F32, [2])], []
    )
    with pytest.raises(BuildgenError, match="the model has no outputs"):
        import_model(save(no_outputs, tmp_path, "a.onnx"), {})
    dangling = make_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", F32, [2])],
        [helper.make_tensor_value_info("ghost", F32, [2])],
    )
    with pytest.raises(BuildgenError, match="graph output 'ghost' is not written by any node"):
        import_model(save(dangling, tmp_path, "b.onnx"), {})


def test_an_opset_newer_than_the_onnx_package_is_refused(tmp_path) -> None:
    import onnx
    from onnx import TensorProto, helper

    from buildgen.errors import BuildgenError
    from buildgen.importer import import_model

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 99)])
    onnx.save(model, tmp_path / "m.onnx")
    with pytest.raises(BuildgenError, match="declares opset 99 .* knows opsets up to"):
        import_model(tmp_path / "m.onnx", {})
