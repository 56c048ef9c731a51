"""Pad in all four modes (constant, reflect, edge, wrap) and every opset's form: the
`paddings` (opset 1) or `pads` (2-10) attribute, the `pads` input (11+) and the `axes`
input (18+). The pads are constants, so the output coordinate -> input coordinate
mapping of every axis is decided here and written into the loops.

Negative pads crop. As in onnxruntime, the input is cropped first and reflect, edge and
wrap then pad what is left (numpy, the ONNX reference, rejects negative pads). Reflect
pads wider than the axis keep mirroring (numpy's rule; onnxruntime refuses them).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from math import prod

from buildgen.backends.c.cwriter import Code, contiguous_strides, linear, literal
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import (
    ANY,
    constant_reason,
    dtype_reason,
    float_attr,
    input_at,
    ints_attr,
    normalize_axis,
    str_attr,
)
from buildgen.backends.c.ops.copy import strided_copy
from buildgen.backends.c.registry import OpEntry
from buildgen.errors import error
from buildgen.ir import Graph, Node

_MODES = ("constant", "reflect", "edge", "wrap")


def _pad_amounts(ctx: LowerContext, node: Node, rank: int) -> list[int]:
    """[begin_0, ..., begin_r-1, end_0, ..., end_r-1] over every axis."""
    if input_at(node, 1):
        pads = ctx.ints(node.inputs[1], node)
    else:  # before opset 11 an attribute, named `paddings` in opset 1
        pads = ints_attr(node, "pads") if node.has_attr("pads") else ints_attr(node, "paddings")
    axes_in = input_at(node, 3)
    if not axes_in:
        return list(pads)
    axes = [normalize_axis(a, rank) for a in ctx.ints(axes_in, node)]
    full = [0] * (2 * rank)
    for k, axis in enumerate(axes):
        full[axis], full[rank + axis] = pads[k], pads[len(axes) + k]
    return full


def _lower_pad(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    mode = str_attr(node, "mode", "constant")
    pads = _pad_amounts(ctx, node, len(ctx.shape(node.inputs[0])))
    if mode == "constant":
        return _lower_constant(ctx, nodes, pads)
    return _lower_border(ctx, nodes, pads, mode)


def _lower_constant(ctx: LowerContext, nodes: Sequence[Node], pads: Sequence[int]) -> Kernel:
    """Fill with the constant, then copy the (possibly cropped) input in."""
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    shape, out_shape, dtype = ctx.shape(x), ctx.shape(y), ctx.dtype(x)
    rank = len(shape)
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


def _source_coordinate(
    code: Code, mode: str, i: str, s: str, padded: tuple[int, int], kept: int
) -> None:
    """Declares `s`: the coordinate in the kept (cropped) part of an axis, `kept` long,
    that output coordinate `i` reads; `padded` is what the axis gains at (start, end)."""
    begin, end = padded
    shifted = f"{i} - {begin}" if begin else i
    if mode == "edge" or (mode == "reflect" and kept == 1):
        code.line(f"int64_t {s} = {shifted}; /* edge: clamp to [0, {kept - 1}] */")
        if begin:
            code.line(f"if ({s} < 0) {s} = 0;")
        if end:
            code.line(f"if ({s} > {kept - 1}) {s} = {kept - 1};")
        return
    # wrap repeats the axis every `kept`; reflect mirrors it at 0 and kept - 1, which
    # repeats every 2 * (kept - 1)
    period = kept if mode == "wrap" else 2 * (kept - 1)
    value = f"({shifted}) % {period}" if begin else f"{i} % {period}"
    code.line(f"int64_t {s} = {value}; /* {mode}: period {period} */")
    if begin:
        code.line(f"if ({s} < 0) {s} += {period};")
    if mode == "reflect":
        code.line(f"if ({s} > {kept - 1}) {s} = {period} - {s};")


def _lower_border(
    ctx: LowerContext, nodes: Sequence[Node], pads: Sequence[int], mode: str
) -> Kernel:
    """Every output element reads one input element: along a padded axis the coordinate
    is clamped (edge), taken modulo the axis (wrap) or mirrored (reflect). The trailing
    axes that are neither padded nor cropped are copied as one block."""
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    shape, out_shape, dtype = ctx.shape(x), ctx.shape(y), ctx.dtype(x)
    rank = len(shape)
    begins, ends = pads[:rank], pads[rank:]
    untouched = rank
    while untouched > 0 and begins[untouched - 1] == 0 and ends[untouched - 1] == 0:
        untouched -= 1
    block = prod(shape[untouched:])
    src_strides = [s * block for s in contiguous_strides(shape[:untouched])]
    dst_strides = [s * block for s in contiguous_strides(out_shape[:untouched])]
    code = Code()
    src_terms, dst_terms = [], []
    src_base = 0
    with ExitStack() as loops:
        for d in range(untouched):
            i = f"i{d}"
            loops.enter_context(code.block(f"for (int64_t {i} = 0; {i} < {out_shape[d]}; ++{i})"))
            cropped = max(-begins[d], 0)
            kept = shape[d] - cropped - max(-ends[d], 0)
            src_base += cropped * src_strides[d]
            dst_terms.append(i)
            if begins[d] <= 0 and ends[d] <= 0:  # only cropped: output i reads kept i
                src_terms.append(i)
                continue
            if kept <= 0:
                raise error(
                    f"Pad '{node.name}': axis {d} has no element left to {mode}-pad from "
                    f"after its negative pads ({begins[d]}, {ends[d]}) crop it"
                )
            src_terms.append(f"s{d}")
            padded = (max(begins[d], 0), max(ends[d], 0))
            _source_coordinate(code, mode, i, f"s{d}", padded, kept)
        dst = linear(dst_terms, dst_strides)
        src = linear(src_terms, src_strides, src_base)
        if block == 1:
            code.line(f"Y[{dst}] = X[{src}];")
        else:
            code.line(f"memcpy({_at('Y', dst)}, {_at('X', src)}, {block * dtype.itemsize});")
    params = (Param("X", x, dtype.c_type), Param("Y", y, dtype.c_type, True))
    return Kernel(kernel_stem(nodes), tuple(nodes), params, code.lines)


def _at(pointer: str, offset: str) -> str:
    return pointer if offset == "0" else f"{pointer} + {offset}"


def _check_pad(node: Node, graph: Graph) -> str | None:
    mode = str_attr(node, "mode", "constant")
    if mode not in _MODES:
        return f"Pad with mode '{mode}' not supported ({', '.join(_MODES)} only)"
    return (
        constant_reason(node, graph, 1, "pads")
        or constant_reason(node, graph, 3, "axes")
        or dtype_reason(node, graph, ANY, node.inputs[:1] + node.outputs)
    )


ENTRIES = (OpEntry("Pad", "kernel", _check_pad, lower=_lower_pad),)
