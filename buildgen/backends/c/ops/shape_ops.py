"""Data movement: views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout),
Transpose, Concat, Split, Slice, Expand and Tile.

Shapes are static, so none of these reads its shape/axes inputs at run time: the output
shape in the graph already says what Reshape, Expand, Tile, Squeeze and Split do. Only
Slice needs its starts/steps at code generation time.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from buildgen.backends.c.cwriter import Code, contiguous_strides
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param, View
from buildgen.backends.c.ops.common import (
    ANY,
    constant_reason,
    dtype_reason,
    input_at,
    int_attr,
    ints_attr,
    normalize_axis,
    present,
)
from buildgen.backends.c.ops.copy import chunked_copy, strided_copy, tiled_transpose
from buildgen.backends.c.registry import OpEntry
from buildgen.errors import error
from buildgen.ir import Graph, Node


def _io_params(ctx: LowerContext, node: Node) -> tuple[Param, Param]:
    x, y = node.inputs[0], node.outputs[0]
    return Param("X", x, ctx.dtype(x).c_type), Param("Y", y, ctx.dtype(y).c_type, True)


def _lower_view(ctx: LowerContext, nodes: Sequence[Node]) -> View:
    return View(nodes[0], nodes[0].inputs[0], nodes[0].outputs[0])


def _lower_transpose(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    shape = ctx.shape(node.inputs[0])
    perm = ints_attr(node, "perm", tuple(reversed(range(len(shape)))))
    in_strides = contiguous_strides(shape)
    out_shape = tuple(shape[p] for p in perm)
    code = Code()
    src = ("X", [in_strides[p] for p in perm], 0)
    dst = ("Y", contiguous_strides(out_shape), 0)
    if not tiled_transpose(code, out_shape, src, dst, "sizeof *X"):
        strided_copy(code, out_shape, src, dst)
    return Kernel(kernel_stem(nodes), tuple(nodes), _io_params(ctx, node), code.lines)


def _lower_concat(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    y = node.outputs[0]
    out_shape = ctx.shape(y)
    axis = normalize_axis(int_attr(node, "axis", 0), len(out_shape))
    outer, inner = prod(out_shape[:axis]), prod(out_shape[axis + 1 :])
    row = out_shape[axis] * inner
    size = ctx.dtype(y).itemsize
    code = Code()
    params: list[Param] = []
    offset = 0
    for k, x in enumerate(present(node.inputs)):
        chunk = ctx.shape(x)[axis] * inner
        if chunk == 0:  # an empty piece adds nothing
            continue
        params.append(Param(f"X{k}", x, ctx.dtype(x).c_type))
        dst = f"Y + {offset}" if offset else "Y"
        chunked_copy(code, outer, chunk * size, dst, row, f"X{k}", chunk)
        offset += chunk
    params.append(Param("Y", y, ctx.dtype(y).c_type, True))
    return Kernel(kernel_stem(nodes), tuple(nodes), tuple(params), code.lines)


def _lower_split(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """The outputs' shapes give the split sizes, whichever way the model states them."""
    node = nodes[0]
    x = node.inputs[0]
    shape = ctx.shape(x)
    axis = normalize_axis(int_attr(node, "axis", 0), len(shape))
    outer, inner = prod(shape[:axis]), prod(shape[axis + 1 :])
    row, size = shape[axis] * inner, ctx.dtype(x).itemsize
    code = Code()
    params = [Param("X", x, ctx.dtype(x).c_type)]
    offset = 0
    for k, y in enumerate(node.outputs):
        chunk = ctx.shape(y)[axis] * inner if y else 0
        if chunk:  # an empty piece gets nothing (and its pointer may be NULL)
            params.append(Param(f"Y{k}", y, ctx.dtype(y).c_type, True))
            src = f"X + {offset}" if offset else "X"
            chunked_copy(code, outer, chunk * size, f"Y{k}", chunk, src, row)
        offset += chunk
    return Kernel(kernel_stem(nodes), tuple(nodes), tuple(params), code.lines)


def slice_range(dim: int, start: int, end: int, step: int) -> tuple[int, int]:
    """(first index, count) of ONNX Slice along one axis, with its clamping rules."""
    if step == 0:
        raise error("Slice with a step of 0")
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return start, max(0, (end - start + step - 1) // step)
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return start, max(0, (start - end - step - 1) // -step)


def _lower_slice(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    shape, out_shape = ctx.shape(x), ctx.shape(y)
    if len(node.inputs) > 1:
        starts, ends = ctx.ints(node.inputs[1], node), ctx.ints(node.inputs[2], node)
        axes_in, steps_in = input_at(node, 3), input_at(node, 4)
        axes = ctx.ints(axes_in, node) if axes_in else tuple(range(len(starts)))
        steps = ctx.ints(steps_in, node) if steps_in else (1,) * len(starts)
    else:  # opset < 10: attributes
        starts, ends = ints_attr(node, "starts"), ints_attr(node, "ends")
        axes = ints_attr(node, "axes", tuple(range(len(starts))))
        steps = (1,) * len(starts)
    strides = list(contiguous_strides(shape))
    base = 0
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        axis = normalize_axis(axis, len(shape))
        first, count = slice_range(shape[axis], start, end, step)
        if count != out_shape[axis]:
            raise error(
                f"Slice '{node.name}': axis {axis} gives {count} elements, "
                f"the graph says {out_shape[axis]}"
            )
        base += first * strides[axis]
        strides[axis] *= step
    code = Code()
    strided_copy(code, out_shape, ("X", strides, base), ("Y", contiguous_strides(out_shape), 0))
    return Kernel(kernel_stem(nodes), tuple(nodes), _io_params(ctx, node), code.lines)


def _lower_expand(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    shape, out_shape = ctx.shape(node.inputs[0]), ctx.shape(node.outputs[0])
    own = contiguous_strides(shape)
    lead = len(out_shape) - len(shape)
    strides = [
        0 if d < lead or shape[d - lead] == 1 else own[d - lead] for d in range(len(out_shape))
    ]
    code = Code()
    strided_copy(code, out_shape, ("X", strides, 0), ("Y", contiguous_strides(out_shape), 0))
    return Kernel(kernel_stem(nodes), tuple(nodes), _io_params(ctx, node), code.lines)


def _lower_tile(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """Output dim d of size r*n is read as (r, n) with strides (0, input stride)."""
    node = nodes[0]
    shape, out_shape = ctx.shape(node.inputs[0]), ctx.shape(node.outputs[0])
    own = contiguous_strides(shape)
    split_shape: list[int] = []
    strides: list[int] = []
    for d, (n, m) in enumerate(zip(shape, out_shape, strict=True)):
        split_shape += [m // n, n]
        strides += [0, own[d]]
    code = Code()
    strided_copy(code, split_shape, ("X", strides, 0), ("Y", contiguous_strides(split_shape), 0))
    return Kernel(kernel_stem(nodes), tuple(nodes), _io_params(ctx, node), code.lines)


def _check_any(node: Node, graph: Graph) -> str | None:
    return dtype_reason(node, graph, ANY, node.inputs[:1] + node.outputs)


def _check_view(node: Node, graph: Graph) -> str | None:
    if node.op == "Dropout" and len(present(node.outputs)) > 1:
        return "Dropout with a mask output not supported"
    return _check_any(node, graph)


def _check_slice(node: Node, graph: Graph) -> str | None:
    for index, what in ((1, "starts"), (2, "ends"), (3, "axes"), (4, "steps")):
        reason = constant_reason(node, graph, index, what)
        if reason:
            return reason
    return _check_any(node, graph)


def _check_concat(node: Node, graph: Graph) -> str | None:
    return dtype_reason(node, graph, ANY)


_VIEWS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout")
ENTRIES = (
    *(OpEntry(op, "view", _check_view, lower=_lower_view) for op in _VIEWS),
    OpEntry("Transpose", "kernel", _check_any, lower=_lower_transpose),
    OpEntry("Concat", "kernel", _check_concat, lower=_lower_concat, handles_empty=True),
    OpEntry("Split", "kernel", _check_any, lower=_lower_split, handles_empty=True),
    OpEntry("Slice", "kernel", _check_slice, lower=_lower_slice),
    OpEntry("Expand", "kernel", _check_any, lower=_lower_expand),
    OpEntry("Tile", "kernel", _check_any, lower=_lower_tile),
)
