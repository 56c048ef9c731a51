"""OneHot: `depth` positions along `axis` for each index, values[1] ("on") where the
position is the index and values[0] ("off") elsewhere. magika 0.5's byte classifier
one-hot encodes its input bytes this way.

ONNX reads the indices as int64 (a float index is truncated toward zero), counts a
negative one from the end (-1 is depth - 1), and leaves a row all "off" where the index
is outside [-depth, depth). A float is range-checked before the cast: converting NaN or a
float beyond int64 is undefined behaviour in C, and those are out of range anyway."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from buildgen.backends.c.cwriter import Code
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import ANY, NUMERIC, constant_reason, dtype_reason, int_attr
from buildgen.backends.c.registry import OpEntry
from buildgen.ir import DType, Graph, Node


def _lower(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    indices, _depth, values = node.inputs  # depth only sizes Y, whose shape says it
    y = node.outputs[0]
    shape = ctx.shape(y)
    axis = int_attr(node, "axis", -1) % len(shape)
    depth, outer, inner = shape[axis], prod(shape[:axis]), prod(shape[axis + 1:])
    index_is_float = ctx.dtype(indices) == DType.FLOAT32
    code = Code()
    code.line(f"for (int64_t o = 0; o < {outer}; ++o)")
    code.line(f"    for (int64_t i = 0; i < {inner}; ++i) {{")
    if index_is_float:
        code.line(f"        const float v = I[o * {inner} + i];")
        code.line(f"        int64_t at = v > -{depth + 1}.0f && v < {depth}.0f ? (int64_t)v : "
                  f"{depth};")
    else:
        code.line(f"        int64_t at = (int64_t)I[o * {inner} + i];")
    code.line(f"        if (at < 0) at += {depth};")
    code.line(f"        for (int64_t d = 0; d < {depth}; ++d)")
    code.line(f"            Y[(o * {depth} + d) * {inner} + i] = d == at ? V[1] : V[0];")
    code.line("    }")
    params = (
        Param("I", indices, ctx.dtype(indices).c_type, False),
        Param("V", values, ctx.dtype(values).c_type, False),
        Param("Y", y, ctx.dtype(y).c_type, True),
    )
    return Kernel(kernel_stem(nodes), tuple(nodes), params, code.lines)


def _check(node: Node, graph: Graph) -> str | None:
    if len(node.inputs) != 3:
        return "OneHot takes indices, depth and values"
    return (constant_reason(node, graph, 1, "depth")
            or dtype_reason(node, graph, NUMERIC, node.inputs[:1])
            or dtype_reason(node, graph, ANY, (node.inputs[2], *node.outputs)))


ENTRIES = (OpEntry("OneHot", "kernel", _check, lower=_lower),)
