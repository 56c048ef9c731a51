"""What the openblas backend runs: MatMul (batched, broadcast), Gemm and Conv (1-D/2-D, by
im2col), each with the epilogue chain fused after it (bias, scale, residual, BatchNormalization,
activations). Everything else declines, with the reason the partitioner reports."""

from __future__ import annotations

from buildgen.backends.cpu_common.groups import ChainRules
from buildgen.ir import DType, Graph, Node

BLAS_INT_MAX = 2**31 - 1  # scipy-openblas32 and Debian's OpenBLAS use 32-bit integers


def _float_reason(node: Node, graph: Graph) -> str | None:
    for name in (*node.inputs, *node.outputs):
        if name and graph.type_of(name).dtype != DType.FLOAT32:
            return f"{node.op} on {graph.type_of(name).dtype.value} (openblas is float32 only)"
    return None


def _too_big(*dims: int) -> str | None:
    if any(d > BLAS_INT_MAX for d in dims):
        return "a GEMM dimension exceeds OpenBLAS's 32-bit integers"
    return None


def _matmul_reason(node: Node, graph: Graph) -> str | None:
    a, b = (graph.type_of(n).shape for n in node.inputs[:2])
    if not a or not b:
        return "MatMul of a scalar"
    m = a[-2] if len(a) > 1 else 1
    n = b[-1] if len(b) > 1 else 1
    return _too_big(m, n, a[-1])


def _gemm_reason(node: Node, graph: Graph) -> str | None:
    y = graph.type_of(node.outputs[0]).shape
    if len(node.inputs) > 2 and node.inputs[2]:
        c = graph.type_of(node.inputs[2]).shape
        if len(c) > 2 or any(d not in (1, y[i - len(c) + 2]) for i, d in enumerate(c)):
            return f"Gemm C of shape {list(c)} does not broadcast to {list(y)}"
    a = graph.type_of(node.inputs[0]).shape
    return _too_big(*y, *a)


def _conv_reason(node: Node, graph: Graph) -> str | None:
    x = graph.type_of(node.inputs[0]).shape
    w = graph.type_of(node.inputs[1]).shape
    if len(x) not in (3, 4):
        return f"{len(x) - 2}-D Conv (openblas runs 1-D and 2-D)"
    group = node.attr("group", 1)
    assert isinstance(group, int)
    if group > 1 and w[1] == 1:
        # One input channel per group: each GEMM would have K = kernel size, where a direct
        # loop (the c host) is faster than a BLAS call per channel.
        return "depthwise Conv (one input channel per group) is left to the host"
    y = graph.type_of(node.outputs[0]).shape
    k = w[1]
    for d in w[2:]:
        k *= d
    spatial = 1
    for d in y[2:]:
        spatial *= d
    return _too_big(k, spatial, w[0])


_ANCHORS = {"MatMul": _matmul_reason, "Gemm": _gemm_reason, "Conv": _conv_reason}


def anchor_reason(node: Node, graph: Graph) -> str | None:
    if node.domain not in ("", "ai.onnx"):
        return f"op {node.domain}.{node.op} is not supported by openblas"
    check = _ANCHORS.get(node.op)
    if check is None:
        return f"no openblas pattern covers {node.op}"
    return _float_reason(node, graph) or check(node, graph)


RULES = ChainRules(
    kind="openblas",
    anchors=frozenset(_ANCHORS),
    fusable=frozenset(_ANCHORS),
    anchor_reason=anchor_reason,
)
