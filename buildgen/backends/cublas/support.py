"""What the cublas backend runs: float32 MatMul (2-D, batched, or batched against a 2-D
operand) and Gemm, with the elementwise chain after them; everything else declines, with the
reason the partitioner reports.

`gemm_geometry` is the one place that turns a node's shapes into a GEMM: the row-major
product Y[M, N] = op(A)[M, K] · op(B)[K, N], `batch` times with element strides between
the batch's matrices (0: one operand is shared by the whole batch). A MatMul whose B is one
matrix folds A's batch dims into M (A is contiguous), so it is a single GEMM.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from buildgen.backends.cpu_common.groups import ChainRules
from buildgen.backends.cpu_common.steps import Affine, Step
from buildgen.ir import DType, Graph, Node


@dataclass(frozen=True)
class GemmGeometry:
    m: int
    n: int
    k: int
    trans_a: bool  # A is stored [K, M] (Gemm transA)
    trans_b: bool  # B is stored [N, K] (Gemm transB)
    batch: int
    stride_a: int  # elements between the batch's A matrices (0: shared)
    stride_b: int
    alpha: float


def _shape(graph: Graph, name: str) -> tuple[int, ...]:
    return graph.type_of(name).shape


def _matmul_geometry(node: Node, graph: Graph) -> GemmGeometry | str:
    a, b = (_shape(graph, t) for t in node.inputs[:2])
    if len(a) < 2 or len(b) < 2:
        return "MatMul with a 1-D operand (a matrix-vector product)"
    m, k, n = a[-2], a[-1], b[-1]
    a_batch, b_batch = a[:-2], b[:-2]
    if prod(b_batch) == 1:  # one B for every A: fold A's batch into M
        return GemmGeometry(prod(a_batch) * m, n, k, False, False, 1, 0, 0, 1.0)
    if prod(a_batch) == 1:
        return GemmGeometry(m, n, k, False, False, prod(b_batch), 0, k * n, 1.0)
    rank = max(len(a_batch), len(b_batch))
    padded_a = (1,) * (rank - len(a_batch)) + a_batch
    padded_b = (1,) * (rank - len(b_batch)) + b_batch
    if padded_a != padded_b:
        return (f"MatMul broadcasting batch dims {list(a_batch)} against {list(b_batch)} "
                "(cublas runs equal batches, or one side shared)")
    return GemmGeometry(m, n, k, False, False, prod(a_batch), m * k, k * n, 1.0)


def gemm_geometry(node: Node, graph: Graph) -> GemmGeometry | str:
    """The node as a (strided batched) GEMM, or why it is not one cublas runs."""
    if node.op == "MatMul":
        return _matmul_geometry(node, graph)
    a, b = (_shape(graph, t) for t in node.inputs[:2])
    trans_a, trans_b = bool(node.attr("transA", 0)), bool(node.attr("transB", 0))
    m, k = (a[1], a[0]) if trans_a else (a[0], a[1])
    n = b[0] if trans_b else b[1]
    alpha = node.attr("alpha", 1.0)
    assert isinstance(alpha, (int, float))
    return GemmGeometry(m, n, k, trans_a, trans_b, 1, 0, 0, float(alpha))


def _float_reason(node: Node, graph: Graph) -> str | None:
    for name in (*node.inputs, *node.outputs):
        if name and graph.type_of(name).dtype != DType.FLOAT32:
            return f"{node.op} on {graph.type_of(name).dtype.value} (cublas runs float32 here)"
    return None


def anchor_reason(node: Node, graph: Graph) -> str | None:
    if node.domain not in ("", "ai.onnx"):
        return f"op {node.domain}.{node.op} is not supported by cublas"
    if node.op not in ("MatMul", "Gemm"):
        return f"no cublas pattern covers {node.op}"
    reason = _float_reason(node, graph)
    if reason is not None:
        return reason
    if any(d == 0 for t in (*node.inputs[:2], node.outputs[0]) for d in _shape(graph, t)):
        return f"{node.op} of an empty tensor"
    if node.op == "Gemm":
        c = node.inputs[2] if len(node.inputs) > 2 else ""
        if c and graph.type_of(c).rank > 2:
            return "Gemm C of rank > 2"
    geometry = gemm_geometry(node, graph)
    return geometry if isinstance(geometry, str) else None


def step_reason(step: Step, graph: Graph) -> str | None:
    if isinstance(step, Affine):
        return "BatchNormalization after a GEMM (cublas fuses activations and binary ops)"
    return None


RULES = ChainRules(
    kind="cublas",
    anchors=frozenset(("MatMul", "Gemm")),
    fusable=frozenset(("MatMul", "Gemm")),
    anchor_reason=anchor_reason,
    step_reason=step_reason,
    gelu=True,  # the exported erf GELU, in the epilogue kernel
)
