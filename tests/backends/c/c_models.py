"""Two small models built with onnx.helper: an MLP and a conv block (fixed seeds)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _model(
    nodes: list[onnx.NodeProto],
    x: tuple[int, ...],
    y: str,
    weights: dict[str, np.ndarray],
    name: str,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def mlp() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    w = {
        "fc1.weight": rng.normal(0, 0.2, (32, 64)).astype(np.float32),
        "fc1.bias": rng.normal(0, 0.2, (64,)).astype(np.float32),
        "fc2.weight": rng.normal(0, 0.2, (64, 10)).astype(np.float32),
        "fc2.bias": rng.normal(0, 0.2, (10,)).astype(np.float32),
    }
    nodes = [
        helper.make_node(
            "MatMul", ["x", "fc1.weight"], ["/fc1/MatMul_output_0"], name="/fc1/MatMul"
        ),
        helper.make_node(
            "Add", ["/fc1/MatMul_output_0", "fc1.bias"], ["/fc1/Add_output_0"], name="/fc1/Add"
        ),
        helper.make_node("Relu", ["/fc1/Add_output_0"], ["/act/Relu_output_0"], name="/act/Relu"),
        helper.make_node(
            "MatMul",
            ["/act/Relu_output_0", "fc2.weight"],
            ["/fc2/MatMul_output_0"],
            name="/fc2/MatMul",
        ),
        helper.make_node("Add", ["/fc2/MatMul_output_0", "fc2.bias"], ["logits"], name="/fc2/Add"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="/softmax/Softmax", axis=-1),
    ]
    feeds = {"x": rng.normal(0, 1, (4, 32)).astype(np.float32)}
    return _model(nodes, (4, 32), "probs", w, "mlp"), feeds


def conv_block() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    w = {
        "conv1.weight": rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32),
        "conv1.bias": rng.normal(0, 0.1, (8,)).astype(np.float32),
        "bn.scale": rng.uniform(0.5, 1.5, (8,)).astype(np.float32),
        "bn.bias": rng.normal(0, 0.1, (8,)).astype(np.float32),
        "bn.mean": rng.normal(0, 0.1, (8,)).astype(np.float32),
        "bn.var": rng.uniform(0.5, 1.5, (8,)).astype(np.float32),
        "conv2.weight": rng.normal(0, 0.2, (16, 8, 3, 3)).astype(np.float32),
        "conv2.bias": rng.normal(0, 0.1, (1, 16, 1, 1)).astype(np.float32),
        "fc.weight": rng.normal(0, 0.2, (10, 16)).astype(np.float32),
        "fc.bias": rng.normal(0, 0.1, (10,)).astype(np.float32),
        "shape": np.array([1, -1], np.int64),
    }
    nodes = [
        helper.make_node(
            "Conv",
            ["x", "conv1.weight", "conv1.bias"],
            ["c1"],
            name="/conv1/Conv",
            pads=[1, 1, 1, 1],
        ),
        helper.make_node(
            "BatchNormalization",
            ["c1", "bn.scale", "bn.bias", "bn.mean", "bn.var"],
            ["b1"],
            name="/bn/BatchNormalization",
        ),
        helper.make_node("Relu", ["b1"], ["r1"], name="/relu1/Relu"),
        helper.make_node(
            "MaxPool", ["r1"], ["p1"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]
        ),
        helper.make_node(
            "Conv", ["p1", "conv2.weight"], ["c2"], name="/conv2/Conv", pads=[1, 1, 1, 1]
        ),
        helper.make_node("Add", ["c2", "conv2.bias"], ["a2"], name="/conv2/Add"),
        helper.make_node("Relu", ["a2"], ["r2"], name="/relu2/Relu"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="/gap/GlobalAveragePool"),
        helper.make_node("Reshape", ["g", "shape"], ["f"], name="/flatten/Reshape"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["y"], name="/fc/Gemm", transB=1),
    ]
    feeds = {"x": rng.normal(0, 1, (1, 3, 16, 16)).astype(np.float32)}
    return _model(nodes, (1, 3, 16, 16), "y", w, "conv_block"), feeds


def attention() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A pre-norm transformer block: LayerNorm, fused QKV projection, two heads, softmax
    attention, output projection with residual, then a GELU MLP with residual."""
    rng = np.random.default_rng(2)
    b, s, d, h = 2, 8, 16, 2
    hd = d // h

    def param(*shape: int, scale: float = 0.2) -> np.ndarray:
        return rng.normal(0, scale, shape).astype(np.float32)

    w = {
        "ln.scale": rng.uniform(0.5, 1.5, (d,)).astype(np.float32),
        "ln.bias": param(d),
        "qkv.weight": param(d, 3 * d),
        "qkv.bias": param(3 * d),
        "split": np.array([d, d, d], np.int64),
        "heads": np.array([b, s, h, hd], np.int64),
        "merged": np.array([b, s, d], np.int64),
        "scale": np.array(1.0 / np.sqrt(hd), np.float32),
        "out.weight": param(d, d),
        "out.bias": param(d),
        "fc1.weight": param(d, 4 * d),
        "fc1.bias": param(4 * d),
        "fc2.weight": param(4 * d, d),
        "fc2.bias": param(d),
    }
    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", "ln.scale", "ln.bias"], ["ln"], name="/ln/LayerNorm"),
        n("MatMul", ["ln", "qkv.weight"], ["qkv_mm"], name="/qkv/MatMul"),
        n("Add", ["qkv_mm", "qkv.bias"], ["qkv"], name="/qkv/Add"),
        n("Split", ["qkv", "split"], ["q", "k", "v"], name="/split", axis=-1),
        n("Reshape", ["q", "heads"], ["q4"], name="/q/Reshape"),
        n("Reshape", ["k", "heads"], ["k4"], name="/k/Reshape"),
        n("Reshape", ["v", "heads"], ["v4"], name="/v/Reshape"),
        n("Transpose", ["q4"], ["qh"], name="/q/Transpose", perm=[0, 2, 1, 3]),
        n("Transpose", ["k4"], ["kt"], name="/k/Transpose", perm=[0, 2, 3, 1]),
        n("Transpose", ["v4"], ["vh"], name="/v/Transpose", perm=[0, 2, 1, 3]),
        n("MatMul", ["qh", "kt"], ["scores"], name="/attn/MatMul"),
        n("Mul", ["scores", "scale"], ["scaled"], name="/attn/Mul"),
        n("Softmax", ["scaled"], ["probs"], name="/attn/Softmax", axis=-1),
        n("MatMul", ["probs", "vh"], ["ctx"], name="/attn/MatMul_1"),
        n("Transpose", ["ctx"], ["ctx_t"], name="/attn/Transpose", perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx_t", "merged"], ["ctx2"], name="/attn/Reshape"),
        n("MatMul", ["ctx2", "out.weight"], ["o_mm"], name="/out/MatMul"),
        n("Add", ["o_mm", "out.bias"], ["o"], name="/out/Add"),
        n("Add", ["x", "o"], ["res1"], name="/res1/Add"),
        n("MatMul", ["res1", "fc1.weight"], ["f1_mm"], name="/fc1/MatMul"),
        n("Add", ["f1_mm", "fc1.bias"], ["f1"], name="/fc1/Add"),
        n("Gelu", ["f1"], ["g"], name="/act/Gelu", domain=""),
        n("MatMul", ["g", "fc2.weight"], ["f2_mm"], name="/fc2/MatMul"),
        n("Add", ["f2_mm", "fc2.bias"], ["f2"], name="/fc2/Add"),
        n("Add", ["res1", "f2"], ["y"], name="/res2/Add"),
    ]
    feeds = {"x": rng.normal(0, 1, (b, s, d)).astype(np.float32)}
    model = _model(nodes, (b, s, d), "y", w, "attention")
    model.opset_import[0].version = 20  # Gelu
    return model, feeds
