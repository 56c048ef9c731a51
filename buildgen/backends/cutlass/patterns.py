"""What the cutlass backend takes: rules/cutlass.yaml's predicate and decline_reason.

Anchors (float32 only, checked by the table's `where`):
  * Gemm with any transA/transB, alpha, beta; C absent, one row of n values, or m x n;
  * MatMul of rank >= 2 whose B is one matrix (batch rows stack into one GEMM) or carries
    the same batch as A (a batched GEMM);
  * Conv, 2-D, one group, a constant filter, symmetric explicit padding.
Steps fused into the epilogue: a bias-row Add (MatMul, not batched), BatchNormalization
(Conv, inference form with constant parameters), then Relu or the erf GELU.
"""

from __future__ import annotations

import math

from buildgen.backends.cpu_common.gelu import gelu_at
from buildgen.ir import DType, Graph, Node


def _float(graph: Graph, names: tuple[str, ...]) -> bool:
    return all(graph.type_of(t).dtype == DType.FLOAT32 for t in names if t)


def _gemm_reason(node: Node, graph: Graph) -> str | None:
    a, b = node.inputs[0], node.inputs[1]
    if graph.type_of(a).rank != 2 or graph.type_of(b).rank != 2:
        return "Gemm operands must be matrices"
    if len(node.inputs) > 2 and node.inputs[2]:
        m, n = graph.type_of(node.outputs[0]).shape
        shape = graph.type_of(node.inputs[2]).shape
        if tuple(shape) != (m, n) and (shape[-1:] != (n,) or math.prod(shape) != n):
            return f"C of shape {list(shape)} is neither a bias row of {n} nor {m} x {n}"
    return None


def _matmul_reason(node: Node, graph: Graph) -> str | None:
    sa, sb = graph.type_of(node.inputs[0]).shape, graph.type_of(node.inputs[1]).shape
    if len(sa) < 2 or len(sb) < 2:
        return "MatMul of a vector (rank 1) is left to other backends"
    if len(sb) > 2 and sa[:-2] != sb[:-2]:
        return f"broadcast batch dimensions {list(sa[:-2])} x {list(sb[:-2])}"
    return None


def _conv_reason(node: Node, graph: Graph) -> str | None:
    if graph.type_of(node.inputs[0]).rank != 4:
        return "only 2-D convolutions (NCHW input)"
    if not graph.is_weight(node.inputs[1]):
        return "the filter must be a constant (it is reordered once at create)"
    if node.attr("group", 1) != 1:
        return "grouped convolutions are left to cuDNN"
    if str(node.attr("auto_pad", "NOTSET")) not in ("NOTSET", "VALID"):
        return "auto_pad SAME_* (resolve the padding at export)"
    pads = node.attr("pads", (0, 0, 0, 0))
    assert isinstance(pads, tuple)
    if pads[0] != pads[2] or pads[1] != pads[3]:
        return f"asymmetric pads {list(pads)} (CUTLASS pads both sides alike)"
    return None


ANCHORS = {"Gemm": _gemm_reason, "MatMul": _matmul_reason, "Conv": _conv_reason}


def anchor_reason(node: Node, graph: Graph) -> str | None:
    if not _float(graph, (*node.inputs, *node.outputs)):
        return "float32 only"
    return ANCHORS[node.op](node, graph)


def decline_reason(node: Node, graph: Graph) -> str | None:
    if node.op in ANCHORS:
        return anchor_reason(node, graph)
    if gelu_at(graph, node) is not None:
        return None
    if node.op in ("Relu", "Add", "BatchNormalization"):
        return f"{node.op} runs on cutlass only fused after a Gemm, MatMul or Conv"
    return f"no cutlass pattern covers {node.op}"


def _step_reason(anchor: Node, step: Node, graph: Graph) -> str | None:
    if step.op == "Add":
        other = [t for t in step.inputs if t != anchor.outputs[0]]
        n = graph.type_of(anchor.outputs[0]).shape[-1]
        batched = graph.type_of(anchor.inputs[1]).rank > 2
        if anchor.op != "MatMul" or batched or len(other) != 1 or not graph.is_weight(
                other[0]) or math.prod(graph.type_of(other[0]).shape) != n:
            return "only a constant bias row of the output's last dimension is fused"
    if step.op == "BatchNormalization":
        if anchor.op != "Conv":
            return "BatchNormalization is folded into a Conv only"
        if not all(graph.is_weight(t) for t in step.inputs[1:5]):
            return "BatchNormalization needs constant scale, bias, mean and variance"
        if len(step.outputs) > 1 and any(step.outputs[1:]):
            return "training-mode BatchNormalization"
    return None


def chain_ok(graph: Graph, nodes: tuple[Node, ...]) -> str | None:
    """The predicate of rules/cutlass.yaml's anchor patterns and its `gelu` pattern."""
    first = nodes[0]
    if first.op not in ANCHORS:
        return None if gelu_at(graph, first) is not None else "not the erf form of GELU"
    reason = anchor_reason(first, graph)
    if reason is not None:
        return reason
    for step in nodes[1:]:
        reason = _step_reason(first, step, graph)
        if reason is not None:
            return reason
    return None
