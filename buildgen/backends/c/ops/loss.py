"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

The input is (N, C, d1, ...) and the target (N, d1, ...) holds class indices, read at run
time: an index outside [0, C) that is not `ignore_index` fails the call. Each position's
loss is -input[n, target, d] * weight[target] (SoftmaxCrossEntropyLoss takes the
log-softmax over C first, computed per position, and writes it to its optional second
output). Ignored positions count 0 with weight 0. `mean` divides the sum by the sum of
the weights taken (the count of positions without a weight input). Sums run in double.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from math import prod

from buildgen.backends.c.cwriter import Code
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import FLOAT, INTS, dtype_reason, input_at, str_attr
from buildgen.backends.c.registry import OpEntry
from buildgen.ir import Graph, Node

_REDUCTIONS = ("none", "sum", "mean")


def _output_at(node: Node, index: int) -> str:
    return node.outputs[index] if index < len(node.outputs) else ""


def _lower(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, target, weight = node.inputs[0], node.inputs[1], input_at(node, 2)
    loss, log_prob = node.outputs[0], _output_at(node, 1)
    shape = ctx.shape(x)
    n, c, d = shape[0], shape[1], prod(shape[2:])
    reduction = str_attr(node, "reduction", "mean")
    softmax = node.op == "SoftmaxCrossEntropyLoss"
    ignore = node.attr("ignore_index", None)
    position = f"n * {d} + d" if d > 1 else "n"
    # the element of class k at this position
    at = f"(n * {c} + {{k}}) * {d} + d" if d > 1 else f"n * {c} + {{k}}"
    xk, xt = f"X[{at.format(k='k')}]", f"X[{at.format(k='t')}]"
    code = Code()
    if reduction != "none":
        code.line("double total = 0.0, weights = 0.0;")
    with ExitStack() as loops:
        loops.enter_context(code.block(f"for (int64_t n = 0; n < {n}; ++n)"))
        if d > 1:
            loops.enter_context(code.block(f"for (int64_t d = 0; d < {d}; ++d)"))
        code.line(f"const int64_t t = (int64_t)T[{position}];")
        value = xt
        if softmax:
            code.line(f"float max = X[{at.format(k='0')}], sum = 0.0f;")
            code.line(f"for (int64_t k = 1; k < {c}; ++k) max = {xk} > max ? {xk} : max;")
            code.line(f"for (int64_t k = 0; k < {c}; ++k) sum += bg_expf({xk} - max);")
            code.line("const float shift = max + logf(sum);")
            if log_prob:
                code.line(
                    f"for (int64_t k = 0; k < {c}; ++k) P[{at.format(k='k')}] = {xk} - shift;"
                )
            value = f"({xt} - shift)"
        if ignore is not None:
            skip = f"L[{position}] = 0.0f; continue;" if reduction == "none" else "continue;"
            code.line(f"if (t == {ignore}) {{ {skip} }}")
        code.line(f"if (t < 0 || t >= {c}) return 1;")
        code.line("const float w = W[t];" if weight else "const float w = 1.0f;")
        if reduction == "none":
            code.line(f"L[{position}] = -{value} * w;")
        else:
            code.line(f"total -= (double){value} * w;")
            code.line("weights += w;")
    if reduction == "sum":
        code.line("L[0] = (float)total;")
    elif reduction == "mean":
        code.line("L[0] = (float)(total / weights);")
    code.line("return 0;")
    params = [Param("X", x, "float"), Param("T", target, ctx.dtype(target).c_type)]
    if weight:
        params.append(Param("W", weight, "float"))
    params.append(Param("L", loss, "float", True))
    if log_prob:
        params.append(Param("P", log_prob, "float", True))
    return Kernel(
        kernel_stem(nodes),
        tuple(nodes),
        tuple(params),
        code.lines,
        fallible=True,
        error_message=f"{node.op} '{node.name}': target index out of range",
    )


def _check(node: Node, graph: Graph) -> str | None:
    reduction = str_attr(node, "reduction", "mean")
    if reduction not in _REDUCTIONS:
        return f"{node.op} with reduction '{reduction}' not supported"
    if graph.type_of(node.inputs[0]).rank < 2:
        return f"{node.op} of an input with rank < 2 not supported"
    tensors = (node.inputs[0], input_at(node, 2), *node.outputs)
    return dtype_reason(node, graph, INTS, node.inputs[1:2]) or dtype_reason(
        node, graph, FLOAT, tensors
    )


ENTRIES = (
    OpEntry("NegativeLogLikelihoodLoss", "kernel", _check, lower=_lower),
    OpEntry("SoftmaxCrossEntropyLoss", "kernel", _check, lower=_lower),
)
