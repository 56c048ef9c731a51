"""The larger models bench_cpu.py times, generated with onnx.helper (nothing downloaded):

    resnet18   224x224 ResNet-18 (basic blocks 64-128-256-512, BatchNormalization after
               every Conv, 1x1 projections where the stride or width changes), ~1.8 GFLOP
    bert       one BERT-base encoder layer: sequence 128, hidden 768, 12 heads, FFN 3072,
               written as exporters write it (MatMul + Add, Reshape/Transpose per head, Div by
               sqrt(d), Softmax, erf GELU, LayerNormalization), ~1.9 GFLOP

Weights come from a fixed seed, scaled so activations stay O(1); the files are the same
bytes on every run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # what onnxruntime reads


class Graph:
    def __init__(self, name: str, seed: int) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def tensor(self, name: str, values: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(values, name))
        return name

    def normal(self, name: str, shape: tuple[int, ...], std: float) -> str:
        values = (self.rng.standard_normal(shape) * std).astype(np.float32)
        return self.tensor(name, values)

    def op(self, op: str, inputs: list[str], name: str, **attrs: object) -> str:
        self.count += 1
        out = f"{name}_out"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def model(self, inputs: dict[str, list[int]], output: str, shape: list[int]
              ) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs.items()],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)],
            self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  ir_version=IR_VERSION)
        onnx.checker.check_model(model)
        return model


def _conv_bn(g: Graph, x: str, cin: int, cout: int, k: int, stride: int, name: str,
             relu: bool) -> str:
    w = g.normal(f"{name}.weight", (cout, cin, k, k), np.sqrt(2.0 / (cin * k * k)))
    y = g.op("Conv", [x, w], f"/{name}/Conv", kernel_shape=[k, k], strides=[stride, stride],
             pads=[k // 2] * 4)
    bn = [g.tensor(f"{name}.bn.{p}", v) for p, v in (
        ("weight", (1 + 0.1 * g.rng.standard_normal(cout)).astype(np.float32)),
        ("bias", (0.1 * g.rng.standard_normal(cout)).astype(np.float32)),
        ("mean", (0.1 * g.rng.standard_normal(cout)).astype(np.float32)),
        ("var", (1 + 0.1 * np.abs(g.rng.standard_normal(cout))).astype(np.float32)),
    )]
    y = g.op("BatchNormalization", [y, *bn], f"/{name}/bn/BatchNormalization", epsilon=1e-5)
    return g.op("Relu", [y], f"/{name}/Relu") if relu else y


def resnet18(batch: int = 1, size: int = 224) -> onnx.ModelProto:
    g = Graph("resnet18", seed=18)
    y = _conv_bn(g, "image", 3, 64, 7, 2, "stem", relu=True)
    y = g.op("MaxPool", [y], "/stem/MaxPool", kernel_shape=[3, 3], strides=[2, 2],
             pads=[1, 1, 1, 1])
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            name = f"layer{stage + 1}.{block}"
            z = _conv_bn(g, y, cin, cout, 3, stride, f"{name}.conv1", relu=True)
            z = _conv_bn(g, z, cout, cout, 3, 1, f"{name}.conv2", relu=False)
            if stride != 1 or cin != cout:
                y = _conv_bn(g, y, cin, cout, 1, stride, f"{name}.downsample", relu=False)
            y = g.op("Add", [z, y], f"/{name}/Add")
            y = g.op("Relu", [y], f"/{name}/Relu")
            cin = cout
    y = g.op("GlobalAveragePool", [y], "/GlobalAveragePool")
    y = g.op("Flatten", [y], "/Flatten", axis=1)
    w = g.normal("fc.weight", (1000, 512), 0.04)
    y = g.op("Gemm", [y, w, g.normal("fc.bias", (1000,), 0.01)], "/fc/Gemm", transB=1)
    return g.model({"image": [batch, 3, size, size]}, y, [batch, 1000])


def _linear(g: Graph, x: str, cin: int, cout: int, name: str) -> str:
    y = g.op("MatMul", [x, g.normal(f"{name}.weight", (cin, cout), 0.02)], f"/{name}/MatMul")
    return g.op("Add", [y, g.normal(f"{name}.bias", (cout,), 0.02)], f"/{name}/Add")


def _layer_norm(g: Graph, x: str, hidden: int, name: str) -> str:
    scale = g.tensor(f"{name}.weight", np.ones(hidden, np.float32))
    bias = g.tensor(f"{name}.bias", np.zeros(hidden, np.float32))
    return g.op("LayerNormalization", [x, scale, bias], f"/{name}/LayerNormalization",
                axis=-1, epsilon=1e-12)


def bert_layer(seq: int = 128, hidden: int = 768, heads: int = 12, ffn: int = 3072
               ) -> onnx.ModelProto:
    g = Graph("bert_layer", seed=768)
    head = hidden // heads
    split = g.tensor("split_heads", np.array([1, seq, heads, head], np.int64))
    merge = g.tensor("merge_heads", np.array([1, seq, hidden], np.int64))
    x = "x"
    qkv = []
    for part, perm in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3])):
        y = _linear(g, x, hidden, hidden, f"attention.{part}")
        y = g.op("Reshape", [y, split], f"/attention/{part}/Reshape")
        qkv.append(g.op("Transpose", [y], f"/attention/{part}/Transpose", perm=perm))
    scores = g.op("MatMul", [qkv[0], qkv[1]], "/attention/scores/MatMul")
    scores = g.op("Div", [scores, g.tensor("sqrt_head", np.array(np.sqrt(head), np.float32))],
                  "/attention/scores/Div")
    probs = g.op("Softmax", [scores], "/attention/Softmax", axis=-1)
    context = g.op("MatMul", [probs, qkv[2]], "/attention/context/MatMul")
    context = g.op("Transpose", [context], "/attention/context/Transpose", perm=[0, 2, 1, 3])
    context = g.op("Reshape", [context, merge], "/attention/context/Reshape")
    y = _linear(g, context, hidden, hidden, "attention.output")
    y = g.op("Add", [y, x], "/attention/output/residual")
    attn = _layer_norm(g, y, hidden, "attention.output.LayerNorm")
    h = _linear(g, attn, hidden, ffn, "intermediate")
    # GELU as torch exports it: x * 0.5 * (1 + erf(x / sqrt(2)))
    e = g.op("Div", [h, g.tensor("sqrt2", np.array(np.sqrt(2.0), np.float32))], "/gelu/Div")
    e = g.op("Erf", [e], "/gelu/Erf")
    e = g.op("Add", [e, g.tensor("one", np.array(1.0, np.float32))], "/gelu/Add")
    h = g.op("Mul", [h, e], "/gelu/Mul")
    h = g.op("Mul", [h, g.tensor("half", np.array(0.5, np.float32))], "/gelu/Mul_1")
    y = _linear(g, h, ffn, hidden, "output")
    y = g.op("Add", [y, attn], "/output/residual")
    y = _layer_norm(g, y, hidden, "output.LayerNorm")
    return g.model({"x": [1, seq, hidden]}, y, [1, seq, hidden])


GENERATED = {
    "resnet18": (resnet18, {"image": [1, 3, 224, 224]}),
    "bert": (bert_layer, {"x": [1, 128, 768]}),
}


def write_generated(folder: Path) -> dict[str, tuple[Path, dict[str, list[int]]]]:
    """Write every generated model into `folder` (skipping an unchanged file)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, (make, inputs) in GENERATED.items():
        path = folder / f"{name}.onnx"
        data = make().SerializeToString()
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
        out[name] = (path, inputs)
    return out
