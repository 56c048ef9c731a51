"""EyeLike: ones on the k-th diagonal of a 2-D output, zeros elsewhere; the input gives
only the shape (its values are never read, so it is not a parameter)."""

from __future__ import annotations

from collections.abc import Sequence

from buildgen.backends.c.cwriter import Code
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import ANY, dtype_reason, int_attr
from buildgen.backends.c.registry import OpEntry
from buildgen.ir import Graph, Node


def _lower(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    y = node.outputs[0]
    rows, cols = ctx.shape(y)
    k = int_attr(node, "k", 0)
    ctype = ctx.dtype(y).c_type
    code = Code()
    code.line(f"memset(Y, 0, {ctx.graph.type_of(y).nbytes});")
    first, last = max(0, -k), min(rows, cols - k)  # the rows the diagonal crosses
    if first < last:
        col = "i" if k == 0 else (f"i + {k}" if k > 0 else f"i - {-k}")
        code.line(f"for (int64_t i = {first}; i < {last}; ++i) Y[i * {cols} + {col}] = 1;")
    params = (Param("Y", y, ctype, True),)
    return Kernel(kernel_stem(nodes), tuple(nodes), params, code.lines)


def _check(node: Node, graph: Graph) -> str | None:
    if graph.type_of(node.outputs[0]).rank != 2:
        return "EyeLike of a tensor with rank other than 2 not supported"
    return dtype_reason(node, graph, ANY)


ENTRIES = (OpEntry("EyeLike", "kernel", _check, lower=_lower),)
