"""Gather and the ops whose output is known at code generation time (Constant, Shape,
Size). Pad lives in pad.py; GatherElements and the scatters in gather_scatter.py."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from buildgen.backends.c.cwriter import Code, literal
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import (
    ANY,
    INTS,
    dtype_reason,
    int_attr,
    normalize_axis,
)
from buildgen.backends.c.registry import OpEntry
from buildgen.ir import DType, Graph, Node


def _lower_gather(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """Indices are read at run time (they may be an input); out-of-range ones fail the call."""
    node = nodes[0]
    x, idx, y = node.inputs[0], node.inputs[1], node.outputs[0]
    shape = ctx.shape(x)
    axis = normalize_axis(int_attr(node, "axis", 0), len(shape))
    outer, dim, inner = prod(shape[:axis]), shape[axis], prod(shape[axis + 1 :])
    count = ctx.graph.type_of(idx).numel
    ctype = ctx.dtype(x).c_type
    code = Code()
    with code.loops((outer, count) if outer > 1 else (count,), prefix="i") as loop:
        o, j = (loop[0], loop[1]) if outer > 1 else ("0", loop[0])
        code.line(f"int64_t k = (int64_t)I[{j}];")
        code.line(f"if (k < 0) k += {dim};")
        code.line(f"if (k < 0 || k >= {dim}) return 1;")
        src = f"(k + {o} * {dim})" if outer > 1 else "k"
        dst = f"({o} * {count} + {j})" if outer > 1 else j
        if inner == 1:
            code.line(f"Y[{dst}] = X[{src}];")
        else:
            nbytes = inner * ctx.dtype(x).itemsize
            code.line(f"memcpy(Y + {dst} * {inner}, X + {src} * {inner}, {nbytes});")
    code.line("return 0;")
    params = (
        Param("X", x, ctype),
        Param("I", idx, ctx.dtype(idx).c_type),
        Param("Y", y, ctype, True),
    )
    return Kernel(
        kernel_stem(nodes),
        tuple(nodes),
        params,
        code.lines,
        fallible=True,
        error_message=f"Gather '{node.name}': index out of range",
    )


def _constant_values(ctx: LowerContext, node: Node) -> tuple[float | int, ...]:
    if node.op == "Shape":
        shape = ctx.shape(node.inputs[0])
        start = int_attr(node, "start", 0)
        end = int_attr(node, "end", len(shape))
        return tuple(shape[slice(start, end)])
    if node.op == "Size":
        return (ctx.graph.type_of(node.inputs[0]).numel,)
    for name in ("value_float", "value_int", "value_floats", "value_ints"):
        if node.has_attr(name):
            value = node.attr(name)
            items = value if isinstance(value, tuple) else (value,)
            return tuple(v for v in items if isinstance(v, (int, float)))
    raise AssertionError("checked by _check_constant")


def _lower_constant(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    y = node.outputs[0]
    dtype = ctx.dtype(y)
    values = _constant_values(ctx, node)
    code = Code()
    items = ", ".join(literal(v, dtype) for v in values)
    code.line(f"static const {dtype.c_type} values[{len(values)}] = {{{items}}};")
    code.line("memcpy(Y, values, sizeof values);")
    return Kernel(
        kernel_stem(nodes), tuple(nodes), (Param("Y", y, dtype.c_type, True),), code.lines
    )


def _check_gather(node: Node, graph: Graph) -> str | None:
    return dtype_reason(node, graph, INTS, node.inputs[1:2]) or dtype_reason(
        node, graph, ANY, node.inputs[:1] + node.outputs
    )


def _check_constant(node: Node, graph: Graph) -> str | None:
    if node.op == "Constant" and not any(
        node.has_attr(a) for a in ("value_float", "value_int", "value_floats", "value_ints")
    ):
        return (
            "Constant with a tensor or string value not supported (the importer makes it a weight)"
        )
    return dtype_reason(node, graph, frozenset({DType.FLOAT32, DType.INT64}), node.outputs)


ENTRIES = (
    OpEntry("Gather", "kernel", _check_gather, lower=_lower_gather),
    OpEntry("Constant", "kernel", _check_constant, lower=_lower_constant),
    OpEntry("Shape", "kernel", _check_constant, lower=_lower_constant),
    OpEntry("Size", "kernel", _check_constant, lower=_lower_constant),
)
