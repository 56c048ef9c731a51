"""The op table of the `c` backend: ONNX op name -> how to check it and how to lower it.

Each op family (ops/*.py) exports a tuple `ENTRIES`; `op_table()` merges them once. There
are three kinds of entries:
  elementwise  `expr` turns the C expressions of the inputs into the output's expression;
               fusion.py chains these into single loop nests.
  kernel       `lower(ctx, nodes)` returns one Kernel; `nodes[0]` is the op, any further
               nodes are epilogue nodes that fusion.py folded into it (bias add, activation).
  view         `lower` returns a View: the output aliases the input's bytes.
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


@cache
def op_table() -> Mapping[str, OpEntry]:
    from buildgen.backends.c.ops import (
        conv_pool,
        elementwise,
        indexing,
        matmul,
        norm,
        reduce,
        shape_ops,
    )

    table: dict[str, OpEntry] = {}
    for family in (elementwise, matmul, conv_pool, norm, reduce, shape_ops, indexing):
        for entry in family.ENTRIES:
            if entry.op in table:
                raise RuntimeError(f"c backend: op {entry.op} registered twice")
            table[entry.op] = entry
    return table
