"""ReverseSequence: the first sequence_lens[b] steps of each batch entry reversed, the
rest copied. The lengths are read at run time; one outside [0, T] fails the call."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from buildgen.backends.c.cwriter import Code
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import ANY, INTS, dtype_reason, int_attr
from buildgen.backends.c.registry import OpEntry
from buildgen.ir import Graph, Node


def _lower(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, lens, y = node.inputs[0], node.inputs[1], node.outputs[0]
    shape = ctx.shape(x)
    time_axis = int_attr(node, "time_axis", 0)
    steps, batch = shape[time_axis], shape[1 - time_axis]
    inner = prod(shape[2:])
    nbytes = inner * ctx.dtype(x).itemsize

    def at(t: str) -> str:
        row = f"{t} * {batch} + b" if time_axis == 0 else f"b * {steps} + {t}"
        return f"({row}) * {inner}" if inner > 1 else f"({row})"

    code = Code()
    with code.block(f"for (int64_t b = 0; b < {batch}; ++b)"):
        code.line("const int64_t n = (int64_t)L[b];")
        code.line(f"if (n < 0 || n > {steps}) return 1;")
        with code.block(f"for (int64_t t = 0; t < {steps}; ++t)"):
            code.line("const int64_t from = t < n ? n - 1 - t : t;")
            code.line(f"memcpy(Y + {at('t')}, X + {at('from')}, {nbytes});")
    code.line("return 0;")
    ctype = ctx.dtype(x).c_type
    params = (
        Param("X", x, ctype),
        Param("L", lens, ctx.dtype(lens).c_type),
        Param("Y", y, ctype, True),
    )
    return Kernel(
        kernel_stem(nodes),
        tuple(nodes),
        params,
        code.lines,
        fallible=True,
        error_message=f"ReverseSequence '{node.name}': a sequence length is out of range",
    )


def _check(node: Node, graph: Graph) -> str | None:
    if graph.type_of(node.inputs[0]).rank < 2:
        return "ReverseSequence of a tensor with rank < 2 not supported"
    axes = {int_attr(node, "time_axis", 0), int_attr(node, "batch_axis", 1)}
    if axes != {0, 1}:
        return "ReverseSequence with time/batch axes other than 0 and 1 not supported"
    return dtype_reason(node, graph, INTS, node.inputs[1:2]) or dtype_reason(
        node, graph, ANY, (node.inputs[0], *node.outputs)
    )


ENTRIES = (OpEntry("ReverseSequence", "kernel", _check, lower=_lower),)
