"""Constant folding: each op on constant inputs becomes a weight holding ONNX's result.

The expected value comes from onnxruntime running the original model with a zero input
(y = k + 0), so the reference is an independent implementation, not the folder's own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_builders import make_model, run_ort, save

from buildgen.importer import import_model
from buildgen.ir.serialize import load_weights

I64, F32, BOOL = TensorProto.INT64, TensorProto.FLOAT, TensorProto.BOOL


def _i(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def _tensor(name: str, array: np.ndarray) -> object:
    from onnx import numpy_helper

    return numpy_helper.from_array(array, name)


def _node(op: str, inputs: list[str], **attrs: object) -> object:
    return helper.make_node(op, inputs, ["k"], name=f"{op}_under_test", **attrs)


C23 = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
CASES = {
    "Constant/value": ([_node("Constant", [], value=_tensor("v", C23))], {}, 17),
    "Constant/value_float": ([_node("Constant", [], value_float=1.5)], {}, 17),
    "Constant/value_floats": ([_node("Constant", [], value_floats=[1.0, -2.25])], {}, 17),
    "Constant/value_int": ([_node("Constant", [], value_int=7)], {}, 17),
    "Constant/value_ints": ([_node("Constant", [], value_ints=[3, -1, 4])], {}, 17),
    "Identity": ([_node("Identity", ["c"])], {"c": C23}, 17),
    "Shape": ([_node("Shape", ["c"])], {"c": C23}, 17),
    "Shape/start": ([_node("Shape", ["c"], start=-1)], {"c": C23}, 17),
    "Size": ([_node("Size", ["c"])], {"c": C23}, 17),
    "Gather": ([_node("Gather", ["c", "i"], axis=1)], {"c": C23, "i": _i(2, 0)}, 17),
    "Concat": ([_node("Concat", ["a", "b"], axis=0)], {"a": _i(1, 2), "b": _i(3)}, 17),
    "Unsqueeze": ([_node("Unsqueeze", ["c", "axes"])], {"c": C23, "axes": _i(0, -1)}, 17),
    "Unsqueeze/attr": ([_node("Unsqueeze", ["c"], axes=[1])], {"c": C23}, 11),
    "Squeeze": ([_node("Squeeze", ["c", "axes"])], {"c": C23.reshape(1, 6, 1), "axes": _i(0)}, 17),
    "Squeeze/attr": ([_node("Squeeze", ["c"], axes=[2])], {"c": C23.reshape(1, 6, 1)}, 11),
    "Cast": ([_node("Cast", ["c"], to=F32)], {"c": _i(5, -3)}, 17),
    "Cast/float_to_int": ([_node("Cast", ["c"], to=I64)], {"c": C23}, 17),
    "Range/int": (
        [_node("Range", ["s", "l", "d"])],
        {"s": _i(10)[0], "l": _i(1)[0], "d": _i(-3)[0]},
        17,
    ),
    "Range/float": (
        [_node("Range", ["s", "l", "d"])],
        {"s": np.float32(0.5), "l": np.float32(2.0), "d": np.float32(0.25)},
        17,
    ),
    "ConstantOfShape": (
        [_node("ConstantOfShape", ["s"], value=_tensor("v", np.array([0.02], np.float32)))],
        {"s": _i(2, 3)},
        17,
    ),
    "ConstantOfShape/default": ([_node("ConstantOfShape", ["s"])], {"s": _i(4)}, 17),
    "Slice": (
        [_node("Slice", ["c", "st", "en", "ax", "sp"])],
        {
            "c": np.arange(24, dtype=np.float32).reshape(4, 6),
            "st": _i(-1, 1),
            "en": _i(-(10**18), 6),
            "ax": _i(0, 1),
            "sp": _i(-2, 2),
        },
        17,
    ),
    "Slice/attr": ([_node("Slice", ["c"], starts=[1], ends=[3], axes=[1])], {"c": C23}, 9),
    "Reshape": (
        [_node("Reshape", ["c", "s"])],
        {"c": np.arange(12, dtype=np.float32).reshape(2, 6), "s": _i(0, 3, -1)},
        17,
    ),
    "Add": ([_node("Add", ["a", "b"])], {"a": _i(1, 2, 3), "b": _i(10)}, 17),
    "Sub": ([_node("Sub", ["a", "b"])], {"a": C23, "b": np.float32([1, 2, 3])}, 17),
    "Mul": ([_node("Mul", ["a", "b"])], {"a": _i(-4, 5), "b": _i(3, -2)}, 17),
    "Div/int_truncates": ([_node("Div", ["a", "b"])], {"a": _i(-7, 7, -6), "b": _i(2, -2, 4)}, 17),
    "Div/float": ([_node("Div", ["a", "b"])], {"a": C23, "b": np.float32(3.0)}, 17),
    "Equal": ([_node("Equal", ["a", "b"])], {"a": _i(1, 2, 3), "b": _i(1, 0, 3)}, 17),
    "Where": (
        [_node("Where", ["m", "a", "b"])],
        {"m": np.array([True, False, True]), "a": _i(1, 2, 3), "b": _i(-1)},
        17,
    ),
    "Expand": ([_node("Expand", ["c", "s"])], {"c": np.float32([[1], [2]]), "s": _i(2, 1, 4)}, 17),
    "ReduceProd": (
        [_node("ReduceProd", ["c"], axes=[1], keepdims=0)],
        {"c": _i(1, 2, 3, 4).reshape(2, 2)},
        17,
    ),
    "ReduceProd/input_axes": (
        [_node("ReduceProd", ["c", "ax"], keepdims=1)],
        {"c": C23, "ax": _i(0)},
        18,
    ),
    "ReduceProd/all": ([_node("ReduceProd", ["c"], keepdims=0)], {"c": _i(2, 3, 7)}, 17),
    "Transpose": ([_node("Transpose", ["c"], perm=[1, 0])], {"c": C23}, 17),
}


def _model_around(nodes: list, consts: dict, opset: int, k: np.ndarray):  # noqa: ANN202
    """y = k + x (Xor for bool): x is a run-time input, so only the last node survives."""
    elem = {np.dtype(np.float32): F32, np.dtype(np.int64): I64, np.dtype(bool): BOOL}[k.dtype]
    last = helper.make_node("Xor" if elem == BOOL else "Add", ["k", "x"], ["y"], name="use")
    return make_model(
        [*nodes, last],
        [helper.make_tensor_value_info("x", elem, list(k.shape))],
        [helper.make_tensor_value_info("y", elem, list(k.shape))],
        {name: np.asarray(value) for name, value in consts.items()},
        opset=opset,
    )


def _expected(nodes: list, consts: dict, opset: int) -> np.ndarray:
    """k as onnxruntime computes it, from a model whose output is k."""
    probe = make_model(
        nodes,
        [],
        [helper.make_empty_tensor_value_info("k")],
        {name: np.asarray(value) for name, value in consts.items()},
        opset=opset,
    )
    return run_ort(probe, {})[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_folds_to_onnxruntimes_value(tmp_path: Path, case: str) -> None:
    nodes, consts, opset = CASES[case]
    expected = _expected(nodes, consts, opset)
    model = _model_around(nodes, consts, opset, expected)
    result = import_model(save(model, tmp_path), {})
    graph = result.graph
    assert [n.name for n in graph.nodes] == ["use"], "the op under test was not folded"
    assert [w.name for w in graph.weights] == ["k"]
    folded = load_weights(graph, result.weights_blob)["k"]
    assert folded.dtype == expected.dtype
    np.testing.assert_array_equal(folded, expected)
    feeds = {"x": np.zeros(expected.shape, expected.dtype)}
    np.testing.assert_array_equal(run_ort(model, feeds)[0], expected)


def test_random_ops_are_not_folded(tmp_path: Path) -> None:
    nodes = [helper.make_node("RandomUniform", [], ["k"], name="rand", shape=[3], seed=1.0)]
    model = _model_around(nodes, {}, 17, np.zeros(3, np.float32))
    graph = import_model(save(model, tmp_path), {}).graph
    assert [n.op for n in graph.nodes] == ["RandomUniform", "Add"]
    assert graph.type_of("k").shape == (3,)


def test_static_shapes_through_ops_onnx_data_propagation_skips(tmp_path: Path) -> None:
    # ONNX's data propagation stops at ReduceProd and Where, so whole-model inference
    # leaves these Reshape outputs unknown; they become static once folding computed the
    # shape inputs and per-node inference runs again.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ReduceProd", ["s"], ["numel"], keepdims=1),
        helper.make_node("Reshape", ["x", "numel"], ["flat"], name="flatten"),
        helper.make_node("Equal", ["s", "three"], ["is3"]),
        helper.make_node("Where", ["is3", "minus1", "s"], ["target"]),
        helper.make_node("Reshape", ["flat", "target"], ["y"], name="unflatten"),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, ["N", 3, 4])],
        [helper.make_tensor_value_info("y", F32, None)],
        {"three": _i(3), "minus1": _i(-1)},
    )
    result = import_model(save(model, tmp_path), {"x": (2, 3, 4)})
    graph = result.graph
    assert [n.name for n in graph.nodes] == ["flatten", "unflatten"]
    assert graph.type_of("flat").shape == (24,)
    assert graph.type_of("y").shape == (2, 3, 4)
    arrays = load_weights(graph, result.weights_blob)
    np.testing.assert_array_equal(arrays["numel"], [24])
    np.testing.assert_array_equal(arrays["target"], [2, -1, 4])
