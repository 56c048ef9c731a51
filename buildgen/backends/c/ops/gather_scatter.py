"""Element-wise indexing with run-time indices: GatherElements, GatherND, ScatterElements
(and its opset 9-10 name Scatter) and ScatterND.

Indices are read at run time (they may be an input). A negative index counts from the
end of its axis; one still out of range fails the call, as in Gather. Scatters copy the
data to the output, then write (or reduce) every update in index order, so with repeated
indices the last update wins and reductions see every one of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from buildgen.backends.c.cwriter import Code, coalesce, contiguous_strides, linear
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import (
    ANY,
    INTS,
    NUMERIC,
    dtype_reason,
    int_attr,
    normalize_axis,
    str_attr,
)
from buildgen.backends.c.registry import OpEntry
from buildgen.ir import DType, Graph, Node

# reduction -> the statement that combines update `u` into the output element `y`. As in
# onnxruntime, max and min keep `y` only when it wins the comparison: a NaN update always
# lands, a NaN already in `y` gives way to the update.
_REDUCE = {
    "none": "{y} = {u};",
    "add": "{y} += {u};",
    "mul": "{y} *= {u};",
    "max": "{y} = {y} > {u} ? {y} : {u};",
    "min": "{y} = {y} < {u} ? {y} : {u};",
}


def _read_index(code: Code, k: str, at: str, dim: int) -> None:
    """Declares `k`, the index at `I[at]` made non-negative; returns 1 when out of range."""
    code.line(f"int64_t {k} = (int64_t)I[{at}];")
    code.line(f"if ({k} < 0) {k} += {dim};")
    code.line(f"if ({k} < 0 || {k} >= {dim}) return 1;")


def _kernel(nodes: Sequence[Node], params: Sequence[Param], code: Code) -> Kernel:
    node = nodes[0]
    code.line("return 0;")
    return Kernel(
        kernel_stem(nodes),
        tuple(nodes),
        tuple(params),
        code.lines,
        fallible=True,
        error_message=f"{node.op} '{node.name}': index out of range",
    )


def _element_loops(ctx: LowerContext, node: Node, code: Code, statement: str) -> None:
    """Loops over the indices of GatherElements / ScatterElements. At each index position
    `at` (also the position in the output or the updates, which have the indices' shape),
    `statement` runs with {at} and {o}, the data element the index selects."""
    data, indices = node.inputs[0], node.inputs[1]
    shape, index_shape = ctx.shape(data), ctx.shape(indices)
    axis = normalize_axis(int_attr(node, "axis", 0), len(shape))
    strides = list(contiguous_strides(shape))
    along = strides[axis]
    strides[axis] = 0  # the index, not the loop counter, moves along `axis`
    extents, (own, picked) = coalesce(index_shape, [contiguous_strides(index_shape), strides])
    with code.loops(extents) as idx:
        at = linear(idx, own)
        _read_index(code, "k", at, shape[axis])
        code.line(statement.format(at=at, o=linear([*idx, "k"], [*picked, along])))


def _lower_gather_elements(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    data, indices, y = node.inputs[0], node.inputs[1], node.outputs[0]
    code = Code()
    _element_loops(ctx, node, code, "Y[{at}] = X[{o}];")
    params = (
        Param("X", data, ctx.dtype(data).c_type),
        Param("I", indices, ctx.dtype(indices).c_type),
        Param("Y", y, ctx.dtype(y).c_type, True),
    )
    return _kernel(nodes, params, code)


def _copy_data(ctx: LowerContext, node: Node, code: Code) -> None:
    code.line(f"memcpy(Y, X, {ctx.graph.type_of(node.outputs[0]).nbytes});")


def _lower_scatter_elements(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    data, indices, updates, y = (*node.inputs[:3], node.outputs[0])
    reduce = _REDUCE[str_attr(node, "reduction", "none")]
    code = Code()
    _copy_data(ctx, node, code)
    _element_loops(ctx, node, code, reduce.format(y="Y[{o}]", u="U[{at}]"))
    params = (
        Param("X", data, ctx.dtype(data).c_type),
        Param("I", indices, ctx.dtype(indices).c_type),
        Param("U", updates, ctx.dtype(updates).c_type),
        Param("Y", y, ctx.dtype(y).c_type, True),
    )
    return _kernel(nodes, params, code)


def _lower_scatter_nd(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """Each of the `count` index tuples (the last indices dim, `depth` long) selects a
    slice of data: the trailing dims after the first `depth`, `size` elements long."""
    node = nodes[0]
    data, indices, updates, y = (*node.inputs[:3], node.outputs[0])
    shape, index_shape = ctx.shape(data), ctx.shape(indices)
    depth = index_shape[-1]
    count, size = prod(index_shape[:-1]), prod(shape[depth:])
    strides = contiguous_strides(shape)
    reduce = str_attr(node, "reduction", "none")
    dtype = ctx.dtype(data)
    code = Code()
    _copy_data(ctx, node, code)
    with code.block(f"for (int64_t t = 0; t < {count}; ++t)"):
        for j in range(depth):
            _read_index(code, f"k{j}", linear(["t"], [depth], j), shape[j])
        offset = linear([f"k{j}" for j in range(depth)], strides[:depth])
        code.line(f"{dtype.c_type} *y = {'Y' if offset == '0' else f'Y + {offset}'};")
        code.line(f"const {dtype.c_type} *u = U + {linear(['t'], [size])};")
        if reduce == "none":
            code.line(f"memcpy(y, u, {size * dtype.itemsize});")
        else:
            statement = _REDUCE[reduce].format(y="y[j]", u="u[j]")
            code.line(f"for (int64_t j = 0; j < {size}; ++j) {statement}")
    params = (
        Param("X", data, dtype.c_type),
        Param("I", indices, ctx.dtype(indices).c_type),
        Param("U", updates, ctx.dtype(updates).c_type),
        Param("Y", y, ctx.dtype(y).c_type, True),
    )
    return _kernel(nodes, params, code)


def _lower_gather_nd(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """Per batch (the first `batch_dims` dims, shared by data and indices), each index tuple
    (the last indices dim, `depth` long) selects a slice of data: the dims after the batch
    dims and the `depth` indexed ones, `size` elements, copied to the output in order."""
    node = nodes[0]
    data, indices, y = node.inputs[0], node.inputs[1], node.outputs[0]
    shape, index_shape = ctx.shape(data), ctx.shape(indices)
    b = int_attr(node, "batch_dims", 0)
    depth = index_shape[-1]
    batches, tuples = prod(shape[:b]), prod(index_shape[b:-1])
    size, batch_stride = prod(shape[b + depth:]), prod(shape[b:])
    strides = contiguous_strides(shape[b:])
    dtype = ctx.dtype(data)
    code = Code()
    with code.loops((batches, tuples), prefix="i") as (n, t):
        code.line(f"const int64_t at = {n} * {tuples} + {t};")
        for j in range(depth):
            _read_index(code, f"k{j}", f"at * {depth} + {j}", shape[b + j])
        offset = linear([n, *(f"k{j}" for j in range(depth))], [batch_stride, *strides[:depth]])
        if size == 1:
            code.line(f"Y[at] = X[{offset}];")
        else:
            code.line(f"memcpy(Y + at * {size}, X + {offset}, {size * dtype.itemsize});")
    params = (
        Param("X", data, dtype.c_type),
        Param("I", indices, ctx.dtype(indices).c_type),
        Param("Y", y, ctx.dtype(y).c_type, True),
    )
    return _kernel(nodes, params, code)


def _check_gather_nd(node: Node, graph: Graph) -> str | None:
    return dtype_reason(node, graph, frozenset({DType.INT64}), node.inputs[1:2]) or dtype_reason(
        node, graph, ANY, [node.inputs[0], *node.outputs]
    )


def _check_gather_elements(node: Node, graph: Graph) -> str | None:
    return dtype_reason(node, graph, INTS, node.inputs[1:2]) or dtype_reason(
        node, graph, ANY, [node.inputs[0], *node.outputs]
    )


def _check_scatter(node: Node, graph: Graph) -> str | None:
    reduction = str_attr(node, "reduction", "none")
    if reduction not in _REDUCE:
        return f"{node.op} with reduction '{reduction}' not supported"
    indices = INTS if node.op != "ScatterND" else frozenset({DType.INT64})
    values = ANY if reduction == "none" else NUMERIC
    return dtype_reason(node, graph, indices, node.inputs[1:2]) or dtype_reason(
        node, graph, values, [node.inputs[0], node.inputs[2], *node.outputs]
    )


ENTRIES = (
    OpEntry("GatherElements", "kernel", _check_gather_elements, lower=_lower_gather_elements),
    OpEntry("GatherND", "kernel", _check_gather_nd, lower=_lower_gather_nd),
    OpEntry("ScatterElements", "kernel", _check_scatter, lower=_lower_scatter_elements),
    OpEntry("Scatter", "kernel", _check_scatter, lower=_lower_scatter_elements),
    OpEntry("ScatterND", "kernel", _check_scatter, lower=_lower_scatter_nd),
)
