"""Which nodes of a region run together.

Two rewrites, decided here and nowhere else:
  epilogues  MatMul / Gemm / Conv absorb a following bias Add and/or an activation into
             the kernel library's epilogue (epilogue.py says which ones fit); a Conv also
             absorbs an inference BatchNormalization (folded at create, as onnxruntime folds
             it at load), so the nodes keep their names for pins and tuning records.
  groups     elementwise nodes whose outputs are consumed only inside one group join it;
             a group becomes one loop nest over its root's output, and its intermediate
             tensors never touch memory.
Everything else is its own unit. A node's result is materialized when it leaves the region
(a region output) or is read by something that is not part of the same unit.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import Literal

from buildgen.backends.c.epilogue import (
    EPILOGUE_ANCHORS,
    activation_of,
    batchnorm_of,
    bias_of,
    scale_of,
)
from buildgen.backends.c.kernel import LowerContext
from buildgen.backends.c.registry import op_table
from buildgen.ir import DType, Node


@dataclass(frozen=True)
class Unit:
    kind: Literal["group", "kernel", "view"]
    nodes: tuple[Node, ...]  # group: members in graph order; kernel: op, then its epilogue


def plan_units(
    ctx: LowerContext, nodes: Sequence[Node], region_outputs: frozenset[str], fuse: bool = True
) -> list[Unit]:
    """The units of a region in execution order (a unit runs where its last node was)."""
    table = op_table()
    index = {n.name: i for i, n in enumerate(nodes)}
    absorbed: dict[str, str] = {}  # epilogue node -> anchor
    chains: dict[str, list[Node]] = {}
    for node in nodes:
        if table[node.op].kind != "kernel" or node.name in absorbed:
            continue  # not a kernel, or a BatchNormalization a Conv's epilogue took
        chain = [node]
        if fuse and node.op in EPILOGUE_ANCHORS:
            # A node joins one epilogue only: in `MatMul(a) + MatMul(b)` with M = 1 each
            # result looks like the other's bias, and the first anchor takes the Add.
            chain += _epilogue_chain(ctx, node, index, region_outputs, absorbed.keys())
        chains[node.name] = chain
        absorbed.update((n.name, node.name) for n in chain[1:])

    group_of: dict[str, int] = {}
    members: dict[int, list[Node]] = {}
    for node in reversed(nodes):
        if table[node.op].kind != "elementwise" or node.name in absorbed:
            continue
        target = _joinable_group(ctx, node, index, group_of, region_outputs) if fuse else None
        gid = target if target is not None else len(members)
        group_of[node.name] = gid
        members.setdefault(gid, []).insert(0, node)

    units: list[tuple[int, Unit]] = []
    for node in nodes:
        kind = table[node.op].kind
        if node.name in chains:
            chain = chains[node.name]
            units.append((index[chain[-1].name], Unit("kernel", tuple(chain))))
        elif kind == "view":
            units.append((index[node.name], Unit("view", (node,))))
    for group in members.values():
        units.append((index[group[-1].name], Unit("group", tuple(group))))
    units.sort(key=lambda pair: pair[0])
    return [unit for _, unit in units]


def _sole_consumer(
    ctx: LowerContext,
    tensor: str,
    index: dict[str, int],
    region_outputs: frozenset[str],
    taken: Set[str],
) -> Node | None:
    """The one reader of `tensor` in the region, unless another epilogue has `taken` it."""
    consumers = ctx.graph.consumers(tensor)
    if tensor in region_outputs or len(consumers) != 1 or consumers[0].name not in index:
        return None
    return None if consumers[0].name in taken else consumers[0]


def _epilogue_chain(
    ctx: LowerContext,
    anchor: Node,
    index: dict[str, int],
    region_outputs: frozenset[str],
    taken: Set[str],
) -> list[Node]:
    """[scale | BatchNormalization][bias Add][activation]: the nodes after `anchor` its
    epilogue can compute, leaving out those `taken` by an earlier anchor's epilogue. A
    BatchNormalization (after a Conv) takes the bias's place: its shift is the bias."""
    if ctx.dtype(anchor.outputs[0]) != DType.FLOAT32:
        return []

    def batchnorm(n: Node, produced: str) -> bool:
        return batchnorm_of(ctx, anchor, n, produced)

    def scale(n: Node, produced: str) -> bool:
        return scale_of(ctx, anchor, n, produced) is not None

    def bias(n: Node, produced: str) -> bool:
        return bias_of(ctx, anchor, n, produced) is not None

    def activation(n: Node, produced: str) -> bool:
        return n.inputs[0] == produced and activation_of(ctx, n) is not None

    produced = anchor.outputs[0]
    first = _sole_consumer(ctx, produced, index, region_outputs, taken)
    folds_batchnorm = first is not None and batchnorm(first, produced)
    steps = (batchnorm, activation) if folds_batchnorm else (scale, bias, activation)
    chain: list[Node] = []
    for fits in steps:  # each optional, in this order
        nxt = _sole_consumer(ctx, produced, index, region_outputs, taken)
        if nxt is not None and fits(nxt, produced):
            chain.append(nxt)
            produced = nxt.outputs[0]
    return chain


def _joinable_group(
    ctx: LowerContext,
    node: Node,
    index: dict[str, int],
    group_of: dict[str, int],
    region_outputs: frozenset[str],
) -> int | None:
    """The group every consumer of `node` belongs to, if its result need not be stored."""
    out = node.outputs[0]
    consumers = ctx.graph.consumers(out)
    if out in region_outputs or not consumers:
        return None
    groups = {group_of.get(c.name) for c in consumers}
    if len(groups) != 1 or any(c.name not in index for c in consumers):
        return None
    return groups.pop()
