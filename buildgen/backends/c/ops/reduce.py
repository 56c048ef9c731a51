"""Reductions (ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp),
ArgMax/ArgMin and TopK.

The kept dims form the outer loops (in output order, so the output is written
contiguously whatever `keepdims` says) and the reduced dims the inner loops, so every
output element is accumulated in a register.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from buildgen.backends.c.cwriter import Code, coalesce, contiguous_strides, linear
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import (
    NUMERIC,
    constant_reason,
    dtype_reason,
    input_at,
    int_attr,
    ints_attr,
    normalize_axis,
)
from buildgen.backends.c.registry import OpEntry
from buildgen.ir import DType, Graph, Node

# op -> (initial value for float, accumulate statement over acc and v, final expression)
_FLOAT_OPS: dict[str, tuple[str, str, str]] = {
    "ReduceSum": ("0.0f", "acc += v;", "acc"),
    "ReduceMean": ("0.0f", "acc += v;", "acc / {n}.0f"),
    "ReduceMax": ("-INFINITY", "acc = v > acc ? v : acc;", "acc"),
    "ReduceMin": ("INFINITY", "acc = v < acc ? v : acc;", "acc"),
    "ReduceProd": ("1.0f", "acc *= v;", "acc"),
    "ReduceL1": ("0.0f", "acc += fabsf(v);", "acc"),
    "ReduceL2": ("0.0f", "acc += v * v;", "sqrtf(acc)"),
    "ReduceSumSquare": ("0.0f", "acc += v * v;", "acc"),
    "ReduceLogSum": ("0.0f", "acc += v;", "logf(acc)"),
}
_INT_OPS: dict[str, tuple[str, str, str]] = {
    "ReduceSum": ("0", "acc += v;", "acc"),
    "ReduceMax": ("{min}", "acc = v > acc ? v : acc;", "acc"),
    "ReduceMin": ("{max}", "acc = v < acc ? v : acc;", "acc"),
    "ReduceProd": ("1", "acc *= v;", "acc"),
}
_INT_LIMITS = {DType.INT64: ("INT64_MIN", "INT64_MAX"), DType.INT32: ("INT32_MIN", "INT32_MAX")}


def reduce_axes(ctx: LowerContext, node: Node) -> tuple[int, ...]:
    """The reduced axes, sorted; () means "none" (only with noop_with_empty_axes=1)."""
    rank = len(ctx.shape(node.inputs[0]))
    axes_input = input_at(node, 1)
    axes = ctx.ints(axes_input, node) if axes_input else ints_attr(node, "axes")
    if not axes:
        return () if int_attr(node, "noop_with_empty_axes", 0) else tuple(range(rank))
    return tuple(sorted({normalize_axis(a, rank) for a in axes}))


def split_loops(
    shape: Sequence[int], axes: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Coalesced (kept extents, their input strides, their output strides, reduced extents,
    their input strides)."""
    strides = contiguous_strides(shape)
    kept = [d for d in range(len(shape)) if d not in axes]
    kept_shape = [shape[d] for d in kept]
    k_ext, (k_in, k_out) = coalesce(
        kept_shape, [[strides[d] for d in kept], contiguous_strides(kept_shape)]
    )
    r_ext, (r_in,) = coalesce([shape[d] for d in axes], [[strides[d] for d in axes]])
    return k_ext, k_in, k_out, r_ext, r_in


def _lower_reduce(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    shape, dtype = ctx.shape(x), ctx.dtype(x)
    axes = reduce_axes(ctx, node)
    code = Code()
    params = (Param("X", x, dtype.c_type), Param("Y", y, dtype.c_type, True))
    if not axes:  # noop_with_empty_axes: the output is the input
        code.line(f"memcpy(Y, X, {ctx.graph.type_of(x).nbytes});")
        return Kernel(kernel_stem(nodes), tuple(nodes), params, code.lines)
    n = prod(shape[a] for a in axes)
    if n == 0:
        return _lower_empty_reduce(ctx, nodes)
    k_ext, k_in, k_out, r_ext, r_in = split_loops(shape, axes)
    ctype = dtype.c_type
    with code.loops(k_ext, prefix="i") as ki:
        base = linear(ki, k_in)
        if node.op == "ReduceLogSumExp":
            _log_sum_exp(code, base, r_ext, r_in)
            final = "max + logf(acc)"
        else:
            init, update, final = (_FLOAT_OPS if dtype == DType.FLOAT32 else _INT_OPS)[node.op]
            if dtype in _INT_LIMITS:
                init = init.format(min=_INT_LIMITS[dtype][0], max=_INT_LIMITS[dtype][1])
            code.line(f"{ctype} acc = {init};")
            with code.loops(r_ext, prefix="r") as ri:
                code.line(f"const {ctype} v = X[{plus(base, linear(ri, r_in))}];")
                code.line(update)
        code.line(f"Y[{linear(ki, k_out)}] = {final.format(n=n)};")
    return Kernel(kernel_stem(nodes), tuple(nodes), params, code.lines)


def _lower_empty_reduce(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """A reduction over an empty axis: every output is the reduction of the empty set
    (0 for sums, -inf for ReduceMax and ReduceLogSum, NaN for ReduceMean, ...), i.e. the
    final expression applied to the initial value. The empty input is not bound."""
    node = nodes[0]
    y, dtype = node.outputs[0], ctx.dtype(node.inputs[0])
    ctype = dtype.c_type
    code = Code()
    if node.op == "ReduceLogSumExp":
        code.line("const float max = -INFINITY, acc = 0.0f;")
        final = "max + logf(acc)"
    else:
        init, _, final = (_FLOAT_OPS if dtype == DType.FLOAT32 else _INT_OPS)[node.op]
        if dtype in _INT_LIMITS:
            init = init.format(min=_INT_LIMITS[dtype][0], max=_INT_LIMITS[dtype][1])
        code.line(f"const {ctype} acc = {init};")
    code.line(f"const {ctype} value = {final.format(n=0)};")
    code.line(f"for (int64_t i = 0; i < {ctx.graph.type_of(y).numel}; ++i) Y[i] = value;")
    return Kernel(kernel_stem(nodes), tuple(nodes), (Param("Y", y, ctype, True),), code.lines)


def _times(index: str, stride: int) -> str:
    return index if stride == 1 else f"{index} * {stride}"


def plus(a: str, b: str) -> str:
    if a == "0":
        return b
    return a if b == "0" else f"{a} + {b}"


def _log_sum_exp(code: Code, base: str, r_ext: Sequence[int], r_in: Sequence[int]) -> None:
    code.line("float max = -INFINITY, acc = 0.0f;")
    with code.loops(r_ext, prefix="r") as ri:
        code.line(f"const float v = X[{plus(base, linear(ri, r_in))}];")
        code.line("max = v > max ? v : max;")
    with code.loops(r_ext, prefix="r") as ri:
        code.line(f"acc += bg_expf(X[{plus(base, linear(ri, r_in))}] - max);")


def _lower_arg(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    shape, dtype = ctx.shape(x), ctx.dtype(x)
    axis = normalize_axis(int_attr(node, "axis", 0), len(shape))
    k_ext, k_in, k_out, _, _ = split_loops(shape, (axis,))
    step = contiguous_strides(shape)[axis]
    better = ">" if node.op == "ArgMax" else "<"
    if int_attr(node, "select_last_index", 0):
        better += "="
    code = Code()
    with code.loops(k_ext, prefix="i") as ki:
        base = linear(ki, k_in)
        code.line(f"{dtype.c_type} best = X[{base}];")
        code.line("int64_t arg = 0;")
        with code.block(f"for (int64_t r = 1; r < {shape[axis]}; ++r)"):
            code.line(
                f"const {dtype.c_type} v = X[{plus(base, f'r * {step}' if step != 1 else 'r')}];"
            )
            code.line(f"if (v {better} best) {{ best = v; arg = r; }}")
        code.line(f"Y[{linear(ki, k_out)}] = arg;")
    params = (Param("X", x, dtype.c_type), Param("Y", y, "int64_t", True))
    return Kernel(kernel_stem(nodes), tuple(nodes), params, code.lines)


def _lower_topk(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """The k largest (or smallest) along `axis`, sorted, ties to the lower index: each
    element is insertion-sorted into a k-long list that drops its last entry when full."""
    node = nodes[0]
    x, values, indices = node.inputs[0], node.outputs[0], node.outputs[1]
    shape = ctx.shape(x)
    axis = normalize_axis(int_attr(node, "axis", -1), len(shape))
    n, k = shape[axis], ctx.shape(values)[axis]
    outer, inner = prod(shape[:axis]), prod(shape[axis + 1 :])
    better = ">" if int_attr(node, "largest", 1) else "<"
    ctype = ctx.dtype(x).c_type
    code = Code()
    lanes = [(e, xs, ys) for e, xs, ys in ((outer, n * inner, k * inner), (inner, 1, 1)) if e > 1]
    with code.loops([e for e, _, _ in lanes], prefix="o") as names:
        x_base = linear(names, [xs for _, xs, _ in lanes])
        y_base = linear(names, [ys for _, _, ys in lanes])
        code.line(f"{ctype} best[{k}];")
        code.line(f"int64_t at[{k}];")
        code.line("int64_t count = 0;")
        with code.block(f"for (int64_t j = 0; j < {n}; ++j)"):
            code.line(f"const {ctype} v = X[{plus(x_base, _times('j', inner))}];")
            code.line(f"if (count == {k} && !(v {better} best[{k - 1}])) continue;")
            code.line(f"int64_t p = count < {k} ? count++ : {k - 1};")
            with code.block(f"for (; p > 0 && v {better} best[p - 1]; --p)"):
                code.line("best[p] = best[p - 1];")
                code.line("at[p] = at[p - 1];")
            code.line("best[p] = v;")
            code.line("at[p] = j;")
        with code.block(f"for (int64_t j = 0; j < {k}; ++j)"):
            y_at = plus(y_base, _times("j", inner))
            code.line(f"V[{y_at}] = best[j];")
            code.line(f"I[{y_at}] = at[j];")
    params = (
        Param("X", x, ctype),
        Param("V", values, ctype, True),
        Param("I", indices, "int64_t", True),
    )
    return Kernel(kernel_stem(nodes), tuple(nodes), params, code.lines)


def _check_reduce(node: Node, graph: Graph) -> str | None:
    reason = constant_reason(node, graph, 1, "axes")
    if reason:
        return reason
    dtype = graph.type_of(node.inputs[0]).dtype
    if dtype != DType.FLOAT32 and node.op not in _INT_OPS:
        return f"dtype {dtype.value} not supported by {node.op} (float32 only)"
    return dtype_reason(node, graph, NUMERIC, node.inputs[:1])


def _check_arg(node: Node, graph: Graph) -> str | None:
    return dtype_reason(node, graph, NUMERIC, node.inputs)


def _check_topk(node: Node, graph: Graph) -> str | None:
    k_input = input_at(node, 1)
    if not node.has_attr("k") and not k_input:
        return "TopK without k not supported"
    return constant_reason(node, graph, 1, "K") or dtype_reason(
        node, graph, NUMERIC, node.inputs[:1] + node.outputs[:1]
    )


ENTRIES = tuple(
    OpEntry(op, "kernel", _check_reduce, lower=_lower_reduce, handles_empty=True)
    for op in (*_FLOAT_OPS, "ReduceLogSumExp")
) + (
    OpEntry("ArgMax", "kernel", _check_arg, lower=_lower_arg),
    OpEntry("ArgMin", "kernel", _check_arg, lower=_lower_arg),
    OpEntry("TopK", "kernel", _check_topk, lower=_lower_topk),
)
