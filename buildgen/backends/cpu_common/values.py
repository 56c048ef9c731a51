"""Constants the generated code inlines: activation parameters, scalar operands and the
per-channel scale and shift of an inference BatchNormalization, read from the weights."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from buildgen.backends.cpu_common.steps import Binary
from buildgen.errors import error
from buildgen.ir import Graph, Node

FLOAT_MAX = float(np.finfo(np.float32).max)


def weight(weights: Mapping[str, np.ndarray] | None, node: Node, name: str) -> np.ndarray:
    if weights is None:
        raise error(f"node '{node.name}' ({node.op}): its constant '{name}' is needed at codegen, "
                    "but no weights were given")
    return np.asarray(weights[name], dtype=np.float32)


def _float_attr(node: Node, name: str, default: float) -> float:
    value = node.attr(name, default)
    assert isinstance(value, (int, float))
    return float(value)


def act_params(node: Node, weights: Mapping[str, np.ndarray] | None) -> tuple[float, float]:
    """(alpha, beta) of an activation, in ONNX's meaning for each op (Clip: (lo, hi))."""
    op = node.op
    if op == "LeakyRelu":
        return _float_attr(node, "alpha", 0.01), 0.0
    if op == "Elu":
        return _float_attr(node, "alpha", 1.0), 0.0
    if op == "HardSigmoid":
        return _float_attr(node, "alpha", 0.2), _float_attr(node, "beta", 0.5)
    if op == "Clip":
        lo = _float_attr(node, "min", -FLOAT_MAX)
        hi = _float_attr(node, "max", FLOAT_MAX)
        if len(node.inputs) > 1 and node.inputs[1]:
            lo = float(weight(weights, node, node.inputs[1]).reshape(-1)[0])
        if len(node.inputs) > 2 and node.inputs[2]:
            hi = float(weight(weights, node, node.inputs[2]).reshape(-1)[0])
        return lo, hi
    return 0.0, 0.0


def scalar_operand(
    step: Binary, graph: Graph, weights: Mapping[str, np.ndarray] | None
) -> float | None:
    """The value of a binary step's other operand when it is a one-element constant."""
    if not graph.is_weight(step.other) or graph.type_of(step.other).numel != 1:
        return None
    return float(weight(weights, step.node, step.other).reshape(-1)[0])


def bn_scale_shift(
    node: Node, weights: Mapping[str, np.ndarray] | None
) -> tuple[np.ndarray, np.ndarray]:
    """scale = gamma / sqrt(var + eps) and shift = beta - mean * scale, as float32."""
    gamma, beta, mean, var = (weight(weights, node, n) for n in node.inputs[1:5])
    eps = np.float32(_float_attr(node, "epsilon", 1e-5))
    scale = (gamma / np.sqrt(var + eps)).astype(np.float32)
    shift = (beta - mean * scale).astype(np.float32)
    return scale, shift
