"""The op table of the `c` backend: ONNX op name -> how to check it and how to lower it.

Each op family (ops/*.py) exports a tuple `ENTRIES`; `op_table()` merges them once. There
are three kinds of entries:
  elementwise  `expr` turns the C expressions of the inputs into the output's expression;
               fusion.py chains these into single loop nests.
  kernel       `lower(ctx, nodes)` returns one Kernel; `nodes[0]` is the op, any further
               nodes are epilogue nodes that fusion.py folded into it (bias add, activation).
  view         `lower` returns a View: the output aliases the input's bytes.

Empty tensors (a zero dim): a node whose outputs are all empty is never lowered (it would
write nothing). A node that turns empty tensors into non-empty ones (a sum over an empty
axis, a concatenation with an empty piece) or writes an empty output beside non-empty ones
is accepted only if its entry says `handles_empty`: its lowering then binds no empty
run-time tensor to a kernel parameter (the caller may pass NULL for one) and still writes
every element of its non-empty outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

from buildgen.backends.c.kernel import LowerContext, Step
from buildgen.ir import DType, Graph, Node

CheckFn = Callable[[Node, Graph], "str | None"]
LowerFn = Callable[[LowerContext, Sequence[Node]], Step]
# (node, argument expressions or None for an omitted input, argument dtypes) -> expression
ExprFn = Callable[[Node, Sequence["str | None"], Sequence["DType | None"]], str]


@dataclass(frozen=True)
class OpEntry:
    op: str
    kind: Literal["elementwise", "kernel", "view"]
    check: CheckFn
    lower: LowerFn | None = None
    expr: ExprFn | None = None
    handles_empty: bool = False  # see the module docstring


@cache
def op_table() -> Mapping[str, OpEntry]:
    from buildgen.backends.c.ops import (
        center_crop_pad,
        conv_pool,
        conv_transpose,
        det,
        elementwise,
        eye_like,
        gather_scatter,
        indexing,
        loss,
        lp_pool,
        matmul,
        norm,
        one_hot,
        pad,
        recurrent,
        reduce,
        resize,
        reverse_sequence,
        shape_ops,
        softmax,
        space_depth,
    )

    table: dict[str, OpEntry] = {}
    families = (
        elementwise,
        matmul,
        conv_pool,
        conv_transpose,
        norm,
        softmax,
        reduce,
        shape_ops,
        indexing,
        pad,
        gather_scatter,
        recurrent,
        resize,
        loss,
        space_depth,
        lp_pool,
        reverse_sequence,
        center_crop_pad,
        det,
        eye_like,
        one_hot,
    )
    for family in families:
        for entry in family.ENTRIES:
            if entry.op in table:
                raise RuntimeError(f"c backend: op {entry.op} registered twice")
            table[entry.op] = entry
    return table
