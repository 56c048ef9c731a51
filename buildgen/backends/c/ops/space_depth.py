"""DepthToSpace and SpaceToDepth: a reshape to 6-D, a transpose and a reshape back, done
as one strided copy (the transposes are the ones the ONNX spec states)."""

from __future__ import annotations

from collections.abc import Sequence

from buildgen.backends.c.cwriter import Code, contiguous_strides
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import ANY, dtype_reason, int_attr, str_attr
from buildgen.backends.c.ops.copy import strided_copy
from buildgen.backends.c.registry import OpEntry
from buildgen.ir import Graph, Node


def _view_and_perm(node: Node, shape: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The 6-D view of the input and the permutation that turns it into the output."""
    n, c, h, w = shape
    b = int_attr(node, "blocksize", 1)
    if node.op == "SpaceToDepth":
        if str_attr(node, "mode", "DCR") == "CRD":
            return (n, c, h // b, b, w // b, b), (0, 1, 3, 5, 2, 4)
        return (n, c, h // b, b, w // b, b), (0, 3, 5, 1, 2, 4)
    if str_attr(node, "mode", "DCR") == "CRD":
        return (n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3)
    return (n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2)


def _lower(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    view, perm = _view_and_perm(node, ctx.shape(x))
    strides = contiguous_strides(view)
    moved = tuple(view[p] for p in perm)
    code = Code()
    strided_copy(
        code, moved, ("X", [strides[p] for p in perm], 0), ("Y", contiguous_strides(moved), 0)
    )
    ctype = ctx.dtype(x).c_type
    params = (Param("X", x, ctype), Param("Y", y, ctype, True))
    return Kernel(kernel_stem(nodes), tuple(nodes), params, code.lines)


def _check(node: Node, graph: Graph) -> str | None:
    if graph.type_of(node.inputs[0]).rank != 4:
        return f"{node.op} of a tensor with rank other than 4 not supported"
    if str_attr(node, "mode", "DCR") not in ("DCR", "CRD"):
        return f"{node.op} with mode '{str_attr(node, 'mode', 'DCR')}' not supported"
    return dtype_reason(node, graph, ANY)


ENTRIES = (
    OpEntry("DepthToSpace", "kernel", _check, lower=_lower),
    OpEntry("SpaceToDepth", "kernel", _check, lower=_lower),
)
