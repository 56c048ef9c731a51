"""Small ONNX models, one per op family the cuda backend implements, with the attributes
that change its indexing (axes, strides, pads, groups, broadcasting, transposes)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


@dataclass(frozen=True)
class OpCase:
    name: str
    make: Callable[[], onnx.ModelProto]


def _model(nodes, inputs, outputs, weights=None) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (weights or {}).items()]
    graph = helper.make_graph(
        nodes, "case", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, F, None) for n in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _w(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


N = helper.make_node
CASES = [
    OpCase("softmax_axes", lambda: _model(
        [N("Softmax", ["x"], ["a"], axis=1), N("LogSoftmax", ["x"], ["b"], axis=-1)],
        [("x", [2, 5, 3])], ["a", "b"])),
    OpCase("reductions", lambda: _model(
        [N("ReduceMean", ["x"], ["a"], axes=[1], keepdims=1),
         N("ReduceMax", ["x"], ["b"], axes=[1, 2], keepdims=0),
         N("ReduceSum", ["x", "ax"], ["c"], keepdims=0),
         N("ReduceL2", ["x"], ["d"], axes=[0], keepdims=1),
         N("GlobalMaxPool", ["y"], ["e"])],
        [("x", [2, 3, 4]), ("y", [2, 3, 4, 5])], ["a", "b", "c", "d", "e"],
        {"ax": np.array([-1], np.int64)})),
    OpCase("transpose_slice_concat", lambda: _model(
        [N("Transpose", ["x"], ["a"], perm=[2, 0, 1]),
         N("Slice", ["x", "st", "en", "axs", "stp"], ["b"]),
         N("Concat", ["x", "w"], ["c"], axis=1)],
        [("x", [2, 6, 5])], ["a", "b", "c"],
        {"st": np.array([1, 4], np.int64), "en": np.array([6, 0], np.int64),
         "axs": np.array([1, 2], np.int64), "stp": np.array([2, -2], np.int64),
         "w": _w(2, 3, 5)})),
    OpCase("gather", lambda: _model(
        [N("Gather", ["x", "i"], ["a"], axis=1)], [("x", [2, 4, 3])], ["a"],
        {"i": np.array([[0, 3], [-1, 1]], np.int64)})),
    OpCase("pools", lambda: _model(
        [N("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
         N("AveragePool", ["x"], ["b"], kernel_shape=[2, 2], pads=[1, 1, 1, 1],
           count_include_pad=1),
         N("AveragePool", ["x"], ["c"], kernel_shape=[3, 2], strides=[1, 2]),
         N("GlobalAveragePool", ["x"], ["d"])],
        [("x", [2, 3, 7, 6])], ["a", "b", "c", "d"])),
    OpCase("convs", lambda: _model(
        [N("Conv", ["x", "w", "b"], ["a"], group=2, strides=[2, 1], dilations=[1, 2],
           pads=[1, 2, 0, 1]),
         N("Conv", ["z", "w1"], ["c"], pads=[1, 1], strides=[2])],
        [("x", [1, 4, 9, 8]), ("z", [2, 3, 10])], ["a", "c"],
        {"w": _w(6, 2, 3, 3, seed=1), "b": _w(6, seed=2), "w1": _w(5, 3, 3, seed=3)})),
    OpCase("matmuls", lambda: _model(
        [N("MatMul", ["v", "b3"], ["a"]), N("MatMul", ["x", "w"], ["c"]),
         N("Gemm", ["g", "gw", "gc"], ["d"], transA=1, transB=1, alpha=0.5, beta=2.0)],
        [("v", [4]), ("x", [2, 1, 3, 4]), ("g", [4, 3])], ["a", "c", "d"],
        {"b3": _w(2, 4, 3, seed=4), "w": _w(5, 4, 2, seed=5), "gw": _w(6, 4, seed=6),
         "gc": _w(3, 1, seed=7)})),
    OpCase("layer_norm", lambda: _model(
        [N("LayerNormalization", ["x", "s", "b"], ["a"], axis=1, epsilon=1e-3)],
        [("x", [2, 3, 4])], ["a"], {"s": _w(3, 4, seed=8), "b": _w(3, 4, seed=9)})),
    OpCase("elementwise", lambda: _model(
        [N("LeakyRelu", ["x"], ["l"], alpha=0.2), N("Clip", ["l", "lo", "hi"], ["c"]),
         N("Sigmoid", ["c"], ["s"]), N("Sub", ["s", "r"], ["a"]),
         N("HardSigmoid", ["x"], ["h"]), N("Abs", ["h"], ["h2"]), N("Sqrt", ["h2"], ["h3"]),
         N("Pow", ["h3", "two"], ["b"]), N("Max", ["x", "r"], ["m"]), N("Tanh", ["m"], ["t"]),
         N("Exp", ["t"], ["e"])],
        [("x", [3, 4]), ("r", [3, 1])], ["a", "b", "e"],
        {"lo": np.array(-0.5, np.float32), "hi": np.array(0.7, np.float32),
         "two": np.array(2.0, np.float32)})),
    OpCase("more_elementwise", lambda: _model(
        [N("BatchNormalization", ["x", "sc", "bi", "mu", "var"], ["n"], epsilon=1e-3),
         N("PRelu", ["n", "slope"], ["p"]), N("Elu", ["p"], ["e"], alpha=0.5),
         N("Selu", ["x"], ["s"]), N("Softplus", ["s"], ["a"]), N("HardSwish", ["x"], ["h"]),
         N("Neg", ["h"], ["g"]), N("Floor", ["g"], ["b"]), N("Reciprocal", ["e"], ["c"]),
         N("Div", ["c", "x"], ["d"])],
        [("x", [2, 3, 5])], ["a", "b", "d"],
        {"sc": _w(3, seed=10), "bi": _w(3, seed=11), "mu": _w(3, seed=12),
         "var": np.abs(_w(3, seed=13)) + 0.5, "slope": _w(3, 1, seed=14)})),
    OpCase("gemm_plain_matvec", lambda: _model(
        [N("Gemm", ["x", "w"], ["a"]), N("MatMul", ["x", "v"], ["b"])],
        [("x", [3, 4])], ["a", "b"], {"w": _w(4, 5, seed=15), "v": _w(4, seed=16)})),
    OpCase("views_out", lambda: _model(
        [N("Relu", ["x"], ["r"]), N("Flatten", ["r"], ["a"], axis=2),
         N("Unsqueeze", ["r", "ax"], ["b"]), N("Reshape", ["x", "shape"], ["c"])],
        [("x", [2, 3, 4])], ["a", "b", "c"],
        {"ax": np.array([1], np.int64), "shape": np.array([4, -1], np.int64)})),
]
