"""import_model on small models: structure, shapes, weights, numerics, external data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_builders import (
    F32,
    I64,
    graph_to_onnx,
    make_model,
    mlp,
    random_feeds,
    run_ort,
    save,
)

from buildgen.importer import ImportResult, import_model
from buildgen.ir import DType, TensorType
from buildgen.ir.serialize import load_weights


def _check_numerics(original: onnx.ModelProto, result: ImportResult) -> None:
    feeds = random_feeds(result.graph)
    expected = run_ort(original, feeds)
    actual = run_ort(graph_to_onnx(result.graph, result.weights_blob), feeds)
    assert len(expected) == len(actual)
    for want, got in zip(expected, actual, strict=True):
        assert want.shape == got.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_mlp_structure_weights_and_numerics(tmp_path: Path) -> None:
    model, weights = mlp()
    path = save(model, tmp_path)
    result = import_model(path, {"x": (8, 16)})
    graph = result.graph

    assert graph.name == "mlp"
    assert graph.opset == 17
    assert graph.source == path.as_posix()
    assert [n.name for n in graph.nodes] == ["fc1/MatMul", "fc1/Add", "relu", "fc2"]
    assert graph.inputs[0].type == TensorType(DType.FLOAT32, (8, 16))
    assert graph.outputs[0].type == TensorType(DType.FLOAT32, (8, 4))
    assert graph.type_of("h2") == TensorType(DType.FLOAT32, (8, 32))
    assert graph.node("fc2").attrs == (("alpha", 0.5), ("transB", 1))
    # weights in order of first use, 64-byte aligned, bytes equal to the initializers
    assert [w.name for w in graph.weights] == ["w1", "b1", "w2", "b2"]
    assert all(w.offset % 64 == 0 for w in graph.weights)
    arrays = load_weights(graph, result.weights_blob)
    for name, array in weights.items():
        np.testing.assert_array_equal(arrays[name], array)
    assert result.files_read == (path,)
    _check_numerics(model, result)


def test_dynamic_batch_is_fixed_by_input_shapes(tmp_path: Path) -> None:
    model, _ = mlp(batch="batch")
    path = save(model, tmp_path)
    for batch in (1, 5):
        graph = import_model(path, {"x": [batch, 16]}).graph
        assert graph.type_of("y").shape == (batch, 4)
        assert all(batch == graph.type_of(v.name).shape[0] for v in graph.values)


def test_reshape_chain_folds_to_static_reshape(tmp_path: Path) -> None:
    # What exporters emit for x.view(x.size(0), -1): Shape → Gather → Unsqueeze → Concat.
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes0"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus1"], ["new_shape"], axis=0),
        helper.make_node("Reshape", ["x", "new_shape"], ["flat"], name="flatten"),
        helper.make_node("Relu", ["flat"], ["y"], name="relu"),
    ]
    consts = {
        "zero": np.array(0, np.int64),
        "axes0": np.array([0], np.int64),
        "minus1": np.array([-1], np.int64),
    }
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, ["N", 3, 4, 5])],
        [helper.make_tensor_value_info("y", F32, ["N", None])],
        consts,
    )
    result = import_model(save(model, tmp_path), {"x": (2, 3, 4, 5)})
    graph = result.graph
    assert [n.op for n in graph.nodes] == ["Reshape", "Relu"]
    assert graph.node("flatten").inputs == ("x", "new_shape")
    assert graph.type_of("flat") == TensorType(DType.FLOAT32, (2, 60))
    # the folded shape is an int64 weight the codegen reads from the IR
    assert graph.weight("new_shape").type == TensorType(DType.INT64, (2,))
    np.testing.assert_array_equal(load_weights(graph, result.weights_blob)["new_shape"], [2, -1])
    assert [w.name for w in graph.weights] == ["new_shape"]  # "zero", "axes0"… are gone
    _check_numerics(model, result)


def test_external_data_loads_and_is_listed(tmp_path: Path) -> None:
    model, weights = mlp()
    path = tmp_path / "ext" / "model.onnx"
    path.parent.mkdir()
    onnx.save(
        model,
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="model.weights",
        size_threshold=0,
    )
    result = import_model(path, {"x": (2, 16)})
    assert result.files_read == (path, path.parent / "model.weights")
    arrays = load_weights(result.graph, result.weights_blob)
    for name, array in weights.items():
        np.testing.assert_array_equal(arrays[name], array)


def test_missing_external_data_file_is_a_clear_error(tmp_path: Path) -> None:
    model, _ = mlp()
    path = tmp_path / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="gone.bin", size_threshold=0)
    (tmp_path / "gone.bin").unlink()
    with pytest.raises(Exception, match="gone.bin' does not exist"):
        import_model(path, {"x": (2, 16)})


def test_gather_on_int64_token_ids(tmp_path: Path) -> None:
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"], axis=0),
        helper.make_node("ReduceSum", ["emb", "axes"], ["y"], keepdims=0),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("ids", I64, ["B", "T"])],
        [helper.make_tensor_value_info("y", F32, ["B", 4])],
        {"table": table, "axes": np.array([1], np.int64)},
    )
    result = import_model(save(model, tmp_path), {"ids": (2, 3)})
    graph = result.graph
    assert graph.inputs[0].type == TensorType(DType.INT64, (2, 3))
    assert graph.type_of("emb").shape == (2, 3, 4)
    assert graph.weight("table").type.dtype is DType.FLOAT32
    _check_numerics(model, result)


def test_weight_listed_as_graph_input_is_a_weight_and_bare_input_is_runtime(tmp_path: Path) -> None:
    # Old exporters list initializers among graph inputs; ONNX node tests pass W as an input.
    w = np.ones((3, 2), np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("MatMul", ["h", "v"], ["y"]),
    ]
    model = make_model(
        nodes,
        [
            helper.make_tensor_value_info(n, F32, s)
            for n, s in (("x", [1, 3]), ("w", [3, 2]), ("v", [2, 2]))
        ],
        [helper.make_tensor_value_info("y", F32, [1, 2])],
        {"w": w},
    )
    graph = import_model(save(model, tmp_path), {}).graph
    assert graph.input_names == ("x", "v")
    assert [w.name for w in graph.weights] == ["w"]


def test_dead_nodes_and_unused_initializers_are_dropped(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["y"]),
        helper.make_node("Sigmoid", ["x"], ["unused"]),
        helper.make_node("Add", ["unused", "c"], ["unused2"]),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [2])],
        [helper.make_tensor_value_info("y", F32, [2])],
        {"c": np.ones(2, np.float32), "stale": np.ones(2, np.float32)},
    )
    graph = import_model(save(model, tmp_path), {}).graph
    assert [n.op for n in graph.nodes] == ["Relu"]
    assert graph.weights == ()
    assert {v.name for v in graph.values} == {"x", "y"}


def test_unused_optional_outputs_are_disconnected(tmp_path: Path) -> None:
    nodes = [helper.make_node("Dropout", ["x"], ["y", "mask"], name="drop")]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [2, 3])],
        [helper.make_tensor_value_info("y", F32, [2, 3])],
        opset=9,
    )
    graph = import_model(save(model, tmp_path), {}).graph
    assert graph.node("drop").outputs == ("y",)
    assert graph.opset == 9


def test_constant_graph_output_becomes_identity_of_a_weight(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("Relu", ["x"], ["y"]),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, ["N", 3])],
        [
            helper.make_tensor_value_info("y", F32, ["N", 3]),
            helper.make_tensor_value_info("x_shape", I64, [2]),
        ],
    )
    result = import_model(save(model, tmp_path), {"x": (4, 3)})
    graph = result.graph
    assert graph.output_names == ("y", "x_shape")
    identity = graph.producer("x_shape")
    assert identity is not None and identity.op == "Identity"
    (weight,) = identity.inputs
    np.testing.assert_array_equal(load_weights(graph, result.weights_blob)[weight], [4, 3])


def test_missing_and_duplicate_node_names_are_made_up(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Neg", ["a"], ["b"], name="same"),
        helper.make_node("Abs", ["b"], ["c"], name="same"),
        helper.make_node("Exp", ["c"], ["y"], name="Relu_0"),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [2])],
        [helper.make_tensor_value_info("y", F32, [2])],
    )
    graph = import_model(save(model, tmp_path), {}).graph
    # "Relu_0" is a real name, so the made-up one for node 0 takes a suffix.
    assert [n.name for n in graph.nodes] == ["Relu_0_1", "same", "Abs_2", "Relu_0"]


def test_nodes_out_of_order_are_sorted_stably(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Neg", ["b"], ["y"], name="last"),
        helper.make_node("Relu", ["x"], ["a"], name="first"),
        helper.make_node("Abs", ["a"], ["b"], name="second"),
        helper.make_node("Exp", ["x"], ["z"], name="other"),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [2])],
        [
            helper.make_tensor_value_info("y", F32, [2]),
            helper.make_tensor_value_info("z", F32, [2]),
        ],
    )
    graph = import_model(save(model, tmp_path), {}).graph
    assert [n.name for n in graph.nodes] == ["first", "second", "last", "other"]


def test_attributes_become_ir_values(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], name="t", perm=[1, 0]),
        helper.make_node("LeakyRelu", ["t"], ["l"], name="l", alpha=0.1),
        helper.make_node(
            "Resize",
            ["l", "", "scales"],
            ["y"],
            name="r",
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        ),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [3, 2])],
        [helper.make_tensor_value_info("y", F32, [4, 6])],
        {"scales": np.array([2.0, 2.0], np.float32)},
    )
    result = import_model(save(model, tmp_path), {})
    graph = result.graph
    assert graph.node("t").attr("perm") == (1, 0)
    assert graph.node("l").attr("alpha") == float(np.float32(0.1))
    assert graph.node("r").attr("mode") == "nearest"
    assert graph.node("r").inputs == ("l", "", "scales")
    _check_numerics(model, result)


def test_opset_of_ir_is_the_default_domain_opset(tmp_path: Path) -> None:
    model, _ = mlp()
    model.opset_import.append(helper.make_opsetid("ai.onnx.ml", 3))
    model.opset_import[0].version = 13
    graph = import_model(save(model, tmp_path), {"x": (1, 16)}).graph
    assert graph.opset == 13


def test_onnx_node_test_style_model_with_weights_as_inputs(tmp_path: Path) -> None:
    nodes = [helper.make_node("Conv", ["x", "W"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    model = make_model(
        nodes,
        [
            helper.make_tensor_value_info("x", F32, [1, 1, 5, 5]),
            helper.make_tensor_value_info("W", F32, [1, 1, 3, 3]),
        ],
        [helper.make_tensor_value_info("y", F32, [1, 1, 5, 5])],
    )
    result = import_model(save(model, tmp_path), {})
    assert result.graph.input_names == ("x", "W")
    assert result.graph.weights == ()
    _check_numerics(model, result)


def test_int32_and_bool_tensors_are_allowed(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Greater", ["x", "zero"], ["mask"]),
        helper.make_node("Cast", ["mask"], ["mask_i32"], to=TensorProto.INT32),
        helper.make_node("Cast", ["mask_i32"], ["y"], to=TensorProto.FLOAT),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [4])],
        [helper.make_tensor_value_info("y", F32, [4])],
        {"zero": np.zeros(1, np.float32)},
    )
    graph = import_model(save(model, tmp_path), {}).graph
    assert graph.type_of("mask").dtype is DType.BOOL
    assert graph.type_of("mask_i32").dtype is DType.INT32


def _width_one_convs(after: str) -> onnx.ModelProto:
    """Transpose -> a 3 x 1 Conv over width 1 -> `after`: Flatten (only reshaped: rewritten),
    Relu (an activation that fuses into it) or Conv (a chain)."""
    rng = np.random.default_rng(5)
    w1 = rng.standard_normal((6, 4, 3, 1)).astype(np.float32)
    w2 = rng.standard_normal((6, 6, 3, 1)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1, 3], name="t"),
             helper.make_node("Conv", ["xt", "w1", "b1"], ["c1"], kernel_shape=[3, 1],
                              pads=[1, 0, 1, 0], name="conv1")]
    out = [1, 60]
    if after == "Flatten":
        nodes += [helper.make_node("Flatten", ["c1"], ["f"], name="flat"),
                  helper.make_node("Relu", ["f"], ["y"], name="relu")]
    elif after == "Relu":
        nodes += [helper.make_node("Relu", ["c1"], ["r"], name="relu"),
                  helper.make_node("Flatten", ["r"], ["y"], name="flat")]
    else:
        nodes.append(helper.make_node("Conv", ["c1", "w2"], ["y"], kernel_shape=[3, 1],
                                      strides=[2, 1], name="conv2"))
        out = [1, 6, 4, 1]
    return make_model(nodes, [helper.make_tensor_value_info("x", F32, [1, 10, 4, 1])],
                      [helper.make_tensor_value_info("y", F32, out)],
                      {"w1": w1, "b1": rng.standard_normal(6).astype(np.float32), "w2": w2})


def test_a_width_one_conv_is_imported_as_a_1d_conv_with_the_same_values(tmp_path: Path) -> None:
    model = _width_one_convs("Flatten")
    result = import_model(save(model, tmp_path), {})
    graph = result.graph
    assert [(n.name, n.op) for n in graph.nodes] == [
        ("t", "Transpose"), ("conv1/to_1d", "Reshape"), ("conv1", "Conv"),
        ("conv1/to_2d", "Reshape"), ("flat", "Flatten"), ("relu", "Relu")]
    conv = graph.nodes[2]
    assert graph.type_of(conv.inputs[0]).shape == (1, 4, 10)
    assert graph.type_of(conv.inputs[1]).shape == (6, 4, 3)
    assert conv.attr("pads") == (1, 1) and conv.attr("kernel_shape") == (3,)
    assert graph.type_of("c1").shape == (1, 6, 10, 1)
    _check_numerics(model, result)


@pytest.mark.parametrize("after", ["Relu", "Conv"])
def test_a_width_one_conv_that_fuses_or_chains_keeps_its_form(tmp_path: Path,
                                                              after: str) -> None:
    """A Reshape after it would stop the activation fusing into it, or split the chain a
    backend runs in its own layout."""
    model = _width_one_convs(after)
    result = import_model(save(model, tmp_path), {})
    assert "Reshape" not in [n.op for n in result.graph.nodes]
    _check_numerics(model, result)


def test_two_width_one_convs_of_one_input_each_get_their_own_reshapes(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    nodes = []
    for i in (1, 2):
        nodes += [helper.make_node("Conv", ["x", f"w{i}"], [f"c{i}"], kernel_shape=[3, 1],
                                   name=f"conv{i}"),
                  helper.make_node("Flatten", [f"c{i}"], [f"f{i}"], name=f"flat{i}")]
    nodes.append(helper.make_node("Add", ["f1", "f2"], ["y"], name="add"))
    model = make_model(nodes, [helper.make_tensor_value_info("x", F32, [1, 4, 9, 1])],
                       [helper.make_tensor_value_info("y", F32, [1, 14])],
                       {f"w{i}": rng.standard_normal((2, 4, 3, 1)).astype(np.float32)
                        for i in (1, 2)})
    result = import_model(save(model, tmp_path), {})
    assert [n.op for n in result.graph.nodes].count("Reshape") == 4
    _check_numerics(model, result)


def test_identities_are_dropped_but_a_graph_outputs(tmp_path: Path) -> None:
    """Readers of an Identity read its input; one writing a graph output keeps its name."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Identity", ["c"], ["i1"], name="id1"),
             helper.make_node("Identity", ["i1"], ["i2"], name="id2"),
             helper.make_node("Relu", ["i2"], ["r"], name="relu"),
             helper.make_node("Identity", ["r"], ["y"], name="id_out")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", F32, [1, 2, 3, 3])],
                       [helper.make_tensor_value_info("y", F32, [1, 4, 3, 3])],
                       {"w": np.ones((4, 2, 1, 1), np.float32)})
    result = import_model(save(model, tmp_path), {})
    assert [(n.name, n.op, n.inputs[0]) for n in result.graph.nodes] == [
        ("conv", "Conv", "x"), ("relu", "Relu", "c"), ("id_out", "Identity", "r")]
    _check_numerics(model, result)


def test_inference_dropouts_are_dropped_unless_in_training_or_their_mask_is_read(
        tmp_path: Path) -> None:
    """A Dropout with no training_mode, or a constant false one, passes its input through
    and goes like an Identity; one in training mode, or whose mask a node reads, stays."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Dropout", ["a"], ["d1"], name="plain"),
             helper.make_node("Dropout", ["d1", "ratio", "off"], ["d2", ""], name="off"),
             helper.make_node("Dropout", ["d2", "ratio", "run_time"], ["d3"], name="run_time"),
             helper.make_node("Dropout", ["d3", "ratio"], ["d4", "mask"], name="masked"),
             helper.make_node("Cast", ["mask"], ["m"], to=F32, name="cast"),
             helper.make_node("Add", ["d4", "m"], ["y"], name="add")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", F32, [2, 3]),
                               helper.make_tensor_value_info("run_time", TensorProto.BOOL, [])],
                       [helper.make_tensor_value_info("y", F32, [2, 3])],
                       {"ratio": np.array(0.5, np.float32), "off": np.array(False)})
    result = import_model(save(model, tmp_path), {})
    assert [(n.name, n.op, n.inputs[0]) for n in result.graph.nodes] == [
        ("relu", "Relu", "x"), ("run_time", "Dropout", "a"), ("masked", "Dropout", "d3"),
        ("cast", "Cast", "mask"), ("add", "Add", "d4")]
