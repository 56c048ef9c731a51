"""CenterCropPad: each axis is cropped or zero-padded to the output's extent, centred
(the odd element goes to the end). The output shape is static, so the offsets follow
from the two shapes and the op is a zero fill plus one strided copy of the kept box."""

from __future__ import annotations

from collections.abc import Sequence

from buildgen.backends.c.cwriter import Code, contiguous_strides
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import ANY, constant_reason, dtype_reason
from buildgen.backends.c.ops.copy import strided_copy
from buildgen.backends.c.registry import OpEntry
from buildgen.ir import Graph, Node


def _lower(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    shape, out_shape = ctx.shape(x), ctx.shape(y)
    in_strides, out_strides = contiguous_strides(shape), contiguous_strides(out_shape)
    box = [min(n, m) for n, m in zip(shape, out_shape, strict=True)]
    src = sum(
        max(0, (n - m) // 2) * s for n, m, s in zip(shape, out_shape, in_strides, strict=True)
    )
    dst = sum(
        max(0, (m - n) // 2) * s for n, m, s in zip(shape, out_shape, out_strides, strict=True)
    )
    code = Code()
    if any(m > n for n, m in zip(shape, out_shape, strict=True)):
        code.line(f"memset(Y, 0, {ctx.graph.type_of(y).nbytes});")
    strided_copy(code, box, ("X", in_strides, src), ("Y", out_strides, dst))
    ctype = ctx.dtype(x).c_type
    params = (Param("X", x, ctype), Param("Y", y, ctype, True))
    return Kernel(kernel_stem(nodes), tuple(nodes), params, code.lines)


def _check(node: Node, graph: Graph) -> str | None:
    return constant_reason(node, graph, 1, "shape") or dtype_reason(
        node, graph, ANY, (node.inputs[0], *node.outputs)
    )


ENTRIES = (OpEntry("CenterCropPad", "kernel", _check, lower=_lower),)
