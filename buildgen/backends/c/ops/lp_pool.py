"""LpPool: y = (sum over the window of |x|^p)^(1/p), padding counting as zeros. One
direct loop nest for any number of spatial dims (the kernels of bg_pool.h have no p-norm)."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from buildgen.backends.c.cwriter import Code, contiguous_strides, float_literal, linear
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import float_reason, int_attr, ints_attr
from buildgen.backends.c.ops.conv_pool import spatial
from buildgen.backends.c.registry import OpEntry
from buildgen.ir import Graph, Node


def _powers(p: int) -> tuple[str, str]:
    """(the term summed for v = |x|, the final expression of sum)."""
    if p == 1:
        return "v", "sum"
    if p == 2:
        return "v * v", "sqrtf(sum)"
    return f"powf(v, {p}.0f)", f"powf(sum, {float_literal(1.0 / p)})"


def _lower_lp_pool(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    x_shape, y_shape = ctx.shape(x), ctx.shape(y)
    planes = x_shape[0] * x_shape[1]
    term, final = _powers(int_attr(node, "p", 2))
    kernel = ints_attr(node, "kernel_shape")
    g = spatial(node, x_shape, y_shape, kernel)
    rank = len(g.size)
    in_strides = contiguous_strides(g.size)
    code = Code()
    with code.block(f"for (int64_t c = 0; c < {planes}; ++c)"):
        code.line(f"const float *x = X + c * {prod(g.size)};")
        code.line(f"float *y = Y + c * {prod(g.out)};")
        with code.loops(g.out, prefix="o") as outs:
            code.line("float sum = 0.0f;")
            with code.loops(g.kernel, prefix="k") as ks:
                inside = []
                for d in range(rank):
                    index = linear([outs[d], ks[d]], [g.strides[d], g.dilations[d]])
                    index += f" - {g.pads_begin[d]}" if g.pads_begin[d] else ""
                    code.line(f"const int64_t i{d} = {index};")
                    inside.append(f"i{d} >= 0 && i{d} < {g.size[d]}")
                code.line(f"if (!({' && '.join(inside)})) continue;")
                at = linear([f"i{d}" for d in range(rank)], in_strides)
                code.line(f"const float v = fabsf(x[{at}]);")
                code.line(f"sum += {term};")
            code.line(f"y[{linear(outs, contiguous_strides(g.out))}] = {final};")
    params = (Param("X", x, "float"), Param("Y", y, "float", is_output=True))
    return Kernel(kernel_stem(nodes), tuple(nodes), params, code.lines)


def _check(node: Node, graph: Graph) -> str | None:
    if graph.type_of(node.inputs[0]).rank < 3:
        return f"{node.op} of a tensor with rank < 3 not supported"
    if int_attr(node, "p", 2) < 1:
        return f"{node.op} with p < 1 not supported"
    if int_attr(node, "ceil_mode", 0):
        return "LpPool with ceil_mode not supported"
    return float_reason(node, graph)


ENTRIES = (OpEntry("LpPool", "kernel", _check, lower=_lower_lp_pool),)
