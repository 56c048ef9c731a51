"""Ground truth for the kernel tests: numpy for GEMM, onnxruntime for ONNX operator
semantics (one-node models), so padding, dilation, ceil-mode and count_include_pad rules
are onnxruntime's, not a re-derivation of them."""

from __future__ import annotations

from typing import Any

import numpy as np

ACT_NONE, ACT_RELU, ACT_LEAKY_RELU, ACT_CLIP, ACT_SIGMOID, ACT_TANH, ACT_HARDSWISH = range(7)


def apply_act(y: np.ndarray, act: int, alpha: float = 0.0, beta: float = 0.0) -> np.ndarray:
    """The activations of bg_epilogue, in float64."""
    y = y.astype(np.float64)
    if act == ACT_RELU:
        return np.maximum(y, 0.0)
    if act == ACT_LEAKY_RELU:
        return np.where(y >= 0.0, y, y * alpha)
    if act == ACT_CLIP:
        return np.clip(y, alpha, beta)
    if act == ACT_SIGMOID:
        return 1.0 / (1.0 + np.exp(-y))
    if act == ACT_TANH:
        return np.tanh(y)
    if act == ACT_HARDSWISH:
        return y * np.clip(y / 6.0 + 0.5, 0.0, 1.0)
    assert act == ACT_NONE
    return y


def run_one_node(op: str, inputs: dict[str, np.ndarray], **attrs: Any) -> np.ndarray:
    """Run a single ONNX node (opset 19, float32) on onnxruntime, one thread."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    node = helper.make_node(op, list(inputs), ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "one_node",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    # IR version 10: what this onnxruntime accepts, whatever the onnx package defaults to.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=10)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return np.asarray(session.run(None, inputs)[0])


def conv_out(size: int, k: int, stride: int, dil: int, pad_begin: int, pad_end: int) -> int:
    return (size + pad_begin + pad_end - ((k - 1) * dil + 1)) // stride + 1
