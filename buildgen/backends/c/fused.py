"""One loop nest for a group of elementwise nodes (see fusion.py for how groups form).

Every node of the group is evaluated per element of the root's output: each external
input ("leaf") is loaded once per element at its broadcast index (numpy broadcasting
composes, so a leaf maps straight onto the root's index space), every node becomes one
`const` local, and only the root is stored. Scalar weights whose values are known are
written into the code as literals. A big enough nest is a split kernel (split.py): its
outermost loop's iterations are shared among the instance's threads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from buildgen.backends.c.cwriter import (
    Code,
    broadcast_strides,
    coalesce,
    comment,
    contiguous_strides,
    linear,
    literal,
)
from buildgen.backends.c.kernel import POOL, Kernel, LowerContext, Param
from buildgen.backends.c.registry import op_table
from buildgen.backends.c.split import split_fields
from buildgen.ir import Node


def kernel_stem(nodes: Sequence[Node], limit: int = 4) -> str:
    """`mul_add_relu`: the ops in order (repeats collapsed), at most `limit` of them."""
    ops: list[str] = []
    for node in nodes:
        op = node.op.lower()
        if not ops or ops[-1] != op:
            ops.append(op)
    return "_".join(ops[:limit]) + ("_etc" if len(ops) > limit else "")


def _inline_constant(ctx: LowerContext, tensor: str, node: Node) -> str | None:
    if not ctx.known(tensor) or ctx.graph.type_of(tensor).numel != 1:
        return None
    text = literal(ctx.values(tensor, node)[0], ctx.dtype(tensor))
    return f"({text})" if text.startswith("-") else text


def lower_group(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    table = op_table()
    root = nodes[-1]
    out = root.outputs[0]
    out_shape = ctx.shape(out)
    produced = {n.outputs[0] for n in nodes}

    leaves: list[str] = []  # external tensors read from memory, in first-use order
    inlined: dict[str, str] = {}  # scalar constants written as literals
    for node in nodes:
        for tensor in node.inputs:
            if not tensor or tensor in produced or tensor in leaves or tensor in inlined:
                continue
            constant = _inline_constant(ctx, tensor, node)
            if constant is not None:
                inlined[tensor] = constant
            else:
                leaves.append(tensor)

    params = [Param(f"X{k}", t, ctx.dtype(t).c_type) for k, t in enumerate(leaves)]
    params.append(Param("Y", out, ctx.dtype(out).c_type, is_output=True))
    strides = [broadcast_strides(ctx.shape(t), out_shape) for t in leaves]
    strides.append(contiguous_strides(out_shape))
    extents, strides_c = coalesce(out_shape, strides)

    split = split_fields(extents[0], math.prod(extents)) if extents else {}
    code = Code()
    with code.loops(extents, split=bool(split)) as idx:
        local: dict[str, str] = dict(inlined)
        for k, tensor in enumerate(leaves):
            local[tensor] = f"x{k}"
            code.line(f"const {ctx.dtype(tensor).c_type} x{k} = X{k}[{linear(idx, strides_c[k])}];")
        for k, node in enumerate(nodes):
            args = [local[t] if t else None for t in node.inputs]
            dtypes = [ctx.dtype(t) if t else None for t in node.inputs]
            expr_fn = table[node.op].expr
            assert expr_fn is not None
            name = f"t{k}"
            local[node.outputs[0]] = name
            ctype = ctx.dtype(node.outputs[0]).c_type
            code.line(
                f"const {ctype} {name} = {expr_fn(node, args, dtypes)}; /* {comment(node.op)} */"
            )
        code.line(f"Y[{linear(idx, strides_c[-1])}] = {local[out]};")
    if split:
        params.append(POOL)
    return Kernel(kernel_stem(nodes), tuple(nodes), tuple(params), code.lines, **split)
