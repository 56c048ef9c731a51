"""Gather, Pad (constant mode) and the ops whose output is known at code generation time
(Constant, Shape, Size)."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from buildgen.backends.c.cwriter import Code, contiguous_strides, literal
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import (
    ANY,
    INTS,
    constant_reason,
    dtype_reason,
    float_attr,
    input_at,
    int_attr,
    ints_attr,
    normalize_axis,
    str_attr,
)
from buildgen.backends.c.ops.copy import strided_copy
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


def _pad_amounts(ctx: LowerContext, node: Node, rank: int) -> list[int]:
    if len(node.inputs) > 1 and node.inputs[1]:
        pads = ctx.ints(node.inputs[1], node)
    else:  # opset < 11: attribute
        pads = ints_attr(node, "pads")
    axes_in = input_at(node, 3)
    if not axes_in:
        return list(pads)
    axes = [normalize_axis(a, rank) for a in ctx.ints(axes_in, node)]
    full = [0] * (2 * rank)
    for k, axis in enumerate(axes):
        full[axis], full[rank + axis] = pads[k], pads[len(axes) + k]
    return full


def _lower_pad(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """Fill with the constant, then copy the (possibly cropped, for negative pads) input in."""
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    shape, out_shape, dtype = ctx.shape(x), ctx.shape(y), ctx.dtype(x)
    rank = len(shape)
    pads = _pad_amounts(ctx, node, rank)
    params = [Param("X", x, dtype.c_type)]
    value_in = input_at(node, 2)
    if value_in and ctx.known(value_in):
        value = literal(ctx.values(value_in, node)[0], dtype)
    elif value_in:
        params.append(Param("V", value_in, dtype.c_type))
        value = "V[0]"
    else:
        value = literal(float_attr(node, "value", 0.0), dtype)
    params.append(Param("Y", y, dtype.c_type, True))
    code = Code()
    code.line(f"for (int64_t i = 0; i < {ctx.graph.type_of(y).numel}; ++i) Y[i] = {value};")
    src_strides, dst_strides = contiguous_strides(shape), contiguous_strides(out_shape)
    src_base = dst_base = 0
    extent = []
    for d in range(rank):
        begin, end = pads[d], pads[rank + d]
        extent.append(shape[d] + min(begin, 0) + min(end, 0))
        src_base += max(-begin, 0) * src_strides[d]
        dst_base += max(begin, 0) * dst_strides[d]
    if all(e > 0 for e in extent):
        strided_copy(code, extent, ("X", src_strides, src_base), ("Y", dst_strides, dst_base))
    return Kernel(kernel_stem(nodes), tuple(nodes), tuple(params), code.lines)


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


def _check_pad(node: Node, graph: Graph) -> str | None:
    mode = str_attr(node, "mode", "constant")
    if mode != "constant":
        return f"Pad with mode '{mode}' not supported (constant only)"
    return (
        constant_reason(node, graph, 1, "pads")
        or constant_reason(node, graph, 3, "axes")
        or dtype_reason(node, graph, ANY, node.inputs[:1] + node.outputs)
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
    OpEntry("Pad", "kernel", _check_pad, lower=_lower_pad),
    OpEntry("Constant", "kernel", _check_constant, lower=_lower_constant),
    OpEntry("Shape", "kernel", _check_constant, lower=_lower_constant),
    OpEntry("Size", "kernel", _check_constant, lower=_lower_constant),
)
