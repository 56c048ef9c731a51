"""Small ONNX models exercising the CPU library backends (openblas, onednn), built with
onnx.helper, and what each must put on the backend. Shared by tests/backends/openblas and
tests/backends/onednn (whose conftest puts this folder on sys.path)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # what onnxruntime reads


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], onnx.ModelProto]
    inputs: Mapping[str, tuple[int, ...]]
    on_backend: tuple[str, ...]  # ops every build must run on the library backend


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(sum(map(ord, name)))


class Builder:
    """Nodes, weights and I/O of one test graph; weights are random and small."""

    def __init__(self, name: str, opset: int = OPSET) -> None:
        self.name = name
        self.opset = opset
        self.rng = _rng(name)
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[str] = []

    def input(self, name: str, shape: Sequence[int]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        return name

    def weight(self, name: str, shape: Sequence[int], scale: float = 0.3,
               positive: bool = False) -> str:
        values = self.rng.standard_normal(shape).astype(np.float32) * scale
        if positive:
            values = np.abs(values) + 0.5
        self.weights.append(numpy_helper.from_array(values.astype(np.float32), name))
        return name

    def weights_int(self, name: str, values: Sequence[int]) -> str:
        self.weights.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        return name

    def scalar(self, name: str, value: float) -> str:
        self.weights.append(numpy_helper.from_array(np.array(value, dtype=np.float32), name))
        return name

    def node(self, op: str, inputs: Sequence[str], output: str, **attrs: object) -> str:
        self.nodes.append(helper.make_node(op, list(inputs), [output], name=f"/{output}", **attrs))
        return output

    def batch_norm(self, x: str, channels: int, output: str) -> str:
        params = [self.weight(f"{output}_gamma", [channels], positive=True),
                  self.weight(f"{output}_beta", [channels]),
                  self.weight(f"{output}_mean", [channels]),
                  self.weight(f"{output}_var", [channels], positive=True)]
        return self.node("BatchNormalization", [x, *params], output, epsilon=1e-5)

    def model(self) -> onnx.ModelProto:
        # Outputs are typed from ONNX's own shape inference, so the cases state shapes once.
        untyped = [helper.make_empty_tensor_value_info(o) for o in self.outputs]
        graph = helper.make_graph(self.nodes, self.name, self.inputs, untyped, self.weights)
        opsets = [helper.make_opsetid("", self.opset)]
        inferred = onnx.shape_inference.infer_shapes(
            helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION), strict_mode=True
        )
        known = {v.name: v for v in inferred.graph.value_info}
        del graph.output[:]
        graph.output.extend(known[o] for o in self.outputs)
        model = helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)
        onnx.checker.check_model(model)
        return model


def mm_bias_relu() -> onnx.ModelProto:
    b = Builder("mm_bias_relu")
    x = b.input("x", [2, 3, 16, 32])
    y = b.node("MatMul", [x, b.weight("w", [32, 24])], "mm")
    y = b.node("Add", [y, b.weight("bias", [24])], "biased")
    b.outputs.append(b.node("Relu", [y], "y"))
    return b.model()


def mm_batched() -> onnx.ModelProto:
    """Both operands computed at run time, batch broadcast, scale and residual fused."""
    b = Builder("mm_batched")
    left, right = b.input("a", [2, 4, 8, 16]), b.input("b", [1, 4, 16, 8])
    r = b.input("r", [2, 4, 8, 8])
    y = b.node("MatMul", [left, right], "mm")
    y = b.node("Mul", [y, b.scalar("scale", 0.125)], "scaled")
    b.outputs.append(b.node("Add", [r, y], "y"))
    return b.model()


def gemm_variants() -> onnx.ModelProto:
    b = Builder("gemm_variants")
    a = b.input("a", [8, 16])
    y = b.node("Gemm", [a, b.weight("w1", [8, 12]), b.weight("c1", [1, 12])], "g1",
               transA=1, alpha=0.5, beta=2.0)
    y = b.node("Tanh", [y], "t1")
    y = b.node("Gemm", [y, b.weight("w2", [10, 12]), b.weight("c2", [16, 10])], "g2",
               transB=1)
    y = b.node("Sigmoid", [y], "s2")
    y = b.node("Gemm", [y, b.weight("w3", [10, 6]), b.scalar("c3", 0.25)], "g3")
    b.outputs.append(b.node("LeakyRelu", [y], "y", alpha=0.2))
    return b.model()


def conv_block() -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Relu -> residual Add -> 1x1 Conv -> Clip."""
    b = Builder("conv_block")
    x = b.input("x", [1, 8, 12, 12])
    y = b.node("Conv", [x, b.weight("w1", [8, 8, 3, 3])], "c1", pads=[1, 1, 1, 1])
    y = b.batch_norm(y, 8, "bn1")
    y = b.node("Relu", [y], "r1")
    y = b.node("Add", [y, x], "res")
    y = b.node("Conv", [y, b.weight("w2", [4, 8, 1, 1]), b.weight("b2", [4])], "c2")
    b.outputs.append(b.node("Clip", [y, b.scalar("lo", 0.0), b.scalar("hi", 0.6)], "y"))
    return b.model()


def conv_geometry() -> onnx.ModelProto:
    """Grouped, strided, dilated, asymmetrically padded 2-D conv; SAME-padded 1-D conv."""
    b = Builder("conv_geometry")
    x = b.input("x", [2, 6, 11, 13])
    y = b.node("Conv", [x, b.weight("w", [8, 3, 3, 3]), b.weight("bias", [8])], "c",
               group=2, strides=[2, 1], pads=[1, 0, 2, 1], dilations=[1, 2])
    b.outputs.append(b.node("LeakyRelu", [y], "y", alpha=0.2))
    s = b.input("s", [1, 4, 20])
    z = b.node("Conv", [s, b.weight("w1d", [5, 4, 3])], "c1d", strides=[2],
               auto_pad="SAME_UPPER")
    b.outputs.append(b.node("HardSigmoid", [z], "z"))
    return b.model()


def pools() -> onnx.ModelProto:
    b = Builder("pools")
    x = b.input("x", [1, 8, 15, 15])
    y = b.node("MaxPool", [x], "mp", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
               ceil_mode=1)
    y = b.node("AveragePool", [y], "ap", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
               count_include_pad=1)
    y = b.node("Conv", [y, b.weight("w", [6, 8, 3, 3])], "c", pads=[1, 1, 1, 1])
    y = b.node("AveragePool", [y], "ap2", kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1])
    b.outputs.append(b.node("GlobalAveragePool", [y], "y"))
    return b.model()


def stem() -> onnx.ModelProto:
    """A CNN's first layer: an RGB image -> Conv (stride 2) -> Relu -> MaxPool, whose output
    two Convs read (SqueezeNet's fire module: expand 1x1 and 3x3, concatenated)."""
    b = Builder("stem")
    x = b.input("x", [1, 3, 33, 33])
    y = b.node("Conv", [x, b.weight("w", [24, 3, 3, 3]), b.weight("bias", [24])], "conv1",
               strides=[2, 2])
    y = b.node("Relu", [y], "relu1")
    y = b.node("MaxPool", [y], "pool1", kernel_shape=[3, 3], strides=[2, 2])
    e1 = b.node("Conv", [y, b.weight("we1", [8, 24, 1, 1])], "expand1x1")
    e3 = b.node("Conv", [y, b.weight("we3", [8, 24, 3, 3])], "expand3x3", pads=[1, 1, 1, 1])
    b.outputs.append(b.node("Concat", [e1, e3], "y", axis=1))
    return b.model()


def norms() -> onnx.ModelProto:
    b = Builder("norms")
    x = b.input("x", [2, 6, 10])
    y = b.node("Softmax", [x], "sm", axis=1)  # not the innermost: onednn leaves it to c
    y = b.node("LayerNormalization", [y, b.weight("g", [10], positive=True),
                                      b.weight("beta", [10])], "ln", axis=-1, epsilon=1e-5)
    y = b.node("MatMul", [y, b.weight("w", [10, 7])], "mm")
    b.outputs.append(b.node("LogSoftmax", [y], "y", axis=-1))
    return b.model()


def silu() -> onnx.ModelProto:
    """SiLU after a Conv (YOLOv8, EfficientNet), both operand orders, then one whose input
    is also read elsewhere (it cannot fuse: a swish of its own)."""
    b = Builder("silu")
    x = b.input("x", [1, 4, 8, 8])
    c = b.node("Conv", [x, b.weight("w1", [8, 4, 3, 3])], "c1", pads=[1, 1, 1, 1])
    y = b.node("Mul", [c, b.node("Sigmoid", [c], "s1")], "m1")
    c = b.node("Conv", [y, b.weight("w2", [8, 8, 1, 1])], "c2")
    y = b.node("Mul", [b.node("Sigmoid", [c], "s2"), c], "m2")
    z = b.node("Mul", [y, b.node("Sigmoid", [y], "s3")], "m3")
    b.outputs.append(b.node("Add", [z, y], "y"))
    return b.model()


def depthwise_3d() -> onnx.ModelProto:
    b = Builder("depthwise_3d")
    x = b.input("x", [1, 6, 9, 9])
    y = b.node("Conv", [x, b.weight("dw", [6, 1, 3, 3])], "dwc", group=6, pads=[1, 1, 1, 1])
    b.outputs.append(b.node("Relu", [y], "y"))
    v = b.input("v", [1, 2, 5, 6, 7])
    z = b.node("Conv", [v, b.weight("w3", [3, 2, 3, 3, 3])], "c3", pads=[1, 1, 1, 1, 1, 1])
    b.outputs.append(b.node("HardSwish", [z], "z"))
    return b.model()


def mm_clip_open() -> onnx.ModelProto:
    """A Clip whose upper bound is +inf (openwakeword's melspectrogram: Clip(1e-10, inf)
    before a Log): oneDNN's clip post-op gets beta = INFINITY, which the module must
    declare (it did not: the build failed)."""
    b = Builder("mm_clip_open")
    x = b.input("x", [6, 16])
    y = b.node("MatMul", [x, b.weight("w", [16, 8])], "mm")
    b.outputs.append(b.node("Clip", [y, b.scalar("lo", 0.05), b.scalar("hi", np.inf)], "y"))
    return b.model()


def _gelu(b: Builder, x: str, name: str) -> str:
    """GELU the way torch exports it: x * (1 + erf(x / sqrt(2))) * 0.5."""
    d = b.node("Div", [x, b.scalar(f"{name}_sqrt2", 2.0**0.5)], f"{name}_div")
    e = b.node("Erf", [d], f"{name}_erf")
    a = b.node("Add", [e, b.scalar(f"{name}_one", 1.0)], f"{name}_add")
    m = b.node("Mul", [x, a], f"{name}_mul")
    return b.node("Mul", [m, b.scalar(f"{name}_half", 0.5)], name)


def gelu_mlp() -> onnx.ModelProto:
    """A GELU after a Gemm (fused by oneDNN), and one whose input is also an output."""
    b = Builder("gelu_mlp")
    x = b.input("x", [4, 32])
    h = b.node("Gemm", [x, b.weight("w1", [64, 32]), b.weight("b1", [64])], "h", transB=1)
    g = _gelu(b, h, "g1")
    y = b.node("MatMul", [g, b.weight("w2", [64, 16])], "mm")
    b.outputs.append(y)
    b.outputs.append(_gelu(b, y, "z"))  # y is read by the GELU and is a graph output
    return b.model()


def resblock() -> onnx.ModelProto:
    """Conv -> (Conv -> Relu -> Conv) + the first Conv's output -> Relu -> 1x1 Conv: the
    residual dies at the third Conv, which may accumulate into its bytes."""
    b = Builder("resblock")
    x = b.input("x", [1, 8, 10, 10])
    t = b.node("Conv", [x, b.weight("w0", [8, 8, 3, 3])], "c0", pads=[1, 1, 1, 1])
    y = b.node("Conv", [t, b.weight("w1", [8, 8, 3, 3])], "c1", pads=[1, 1, 1, 1])
    y = b.node("Relu", [y], "r1")
    y = b.node("Conv", [y, b.weight("w2", [8, 8, 3, 3])], "c2", pads=[1, 1, 1, 1])
    y = b.node("Add", [y, t], "sum")
    y = b.node("Relu", [y], "r2")
    b.outputs.append(b.node("Conv", [y, b.weight("w3", [4, 8, 1, 1])], "y"))
    return b.model()


COMMON = (
    Case("mm_bias_relu", mm_bias_relu, {"x": (2, 3, 16, 32)}, ("MatMul", "Add", "Relu")),
    Case("mm_batched", mm_batched, {"a": (2, 4, 8, 16), "b": (1, 4, 16, 8), "r": (2, 4, 8, 8)},
         ("MatMul", "Mul", "Add")),
    Case("gemm_variants", gemm_variants, {"a": (8, 16)}, ("Gemm", "Tanh", "Sigmoid", "LeakyRelu")),
    Case("conv_block", conv_block, {"x": (1, 8, 12, 12)},
         ("Conv", "BatchNormalization", "Relu", "Add", "Clip")),
    Case("conv_geometry", conv_geometry, {"x": (2, 6, 11, 13), "s": (1, 4, 20)},
         ("Conv", "LeakyRelu", "HardSigmoid")),
    Case("resblock", resblock, {"x": (1, 8, 10, 10)}, ("Conv", "Relu", "Add")),
)
ONEDNN_ONLY = (
    Case("gelu_mlp", gelu_mlp, {"x": (4, 32)}, ("Gemm", "Erf", "MatMul")),
    Case("mm_clip_open", mm_clip_open, {"x": (6, 16)}, ("MatMul", "Clip")),
    Case("pools", pools, {"x": (1, 8, 15, 15)},
         ("MaxPool", "AveragePool", "Conv", "GlobalAveragePool")),
    Case("norms", norms, {"x": (2, 6, 10)}, ("LayerNormalization", "MatMul", "LogSoftmax")),
    Case("stem", stem, {"x": (1, 3, 33, 33)}, ("Conv", "Relu", "MaxPool", "Concat")),
    Case("silu", silu, {"x": (1, 4, 8, 8)}, ("Conv", "Sigmoid", "Mul")),
    Case("depthwise_3d", depthwise_3d, {"x": (1, 6, 9, 9), "v": (1, 2, 5, 6, 7)},
         ("Conv", "Relu", "HardSwish")),
)
# Built in the quick suite (one small build per backend); the others are slow.
QUICK = ("conv_block", "mm_batched", "mm_clip_open", "stem")
