"""Node names and node order: every node gets a unique name, nodes run in topological order.

Names appear in pins (`pin: {"/layer3/MatMul": cublas}`), partition files and generated
code, so an ONNX name is kept whenever it is present and not taken already; made-up names
follow the node's position in the ONNX file, which does not change when other nodes fold.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import error

if TYPE_CHECKING:
    import onnx


def name_nodes(nodes: Sequence[onnx.NodeProto]) -> None:
    """Give every node a unique non-empty name, in place: '<op>_<index>' where missing."""
    taken: set[str] = set()
    unnamed: list[int] = []
    for index, node in enumerate(nodes):
        if node.name and node.name not in taken:
            taken.add(node.name)
        else:
            unnamed.append(index)
    # Real names are claimed first so that a made-up name never steals a later real one.
    for index in unnamed:
        base = f"{nodes[index].op_type}_{index}"
        name, suffix = base, 1
        while name in taken:
            name, suffix = f"{base}_{suffix}", suffix + 1
        nodes[index].name = name
        taken.add(name)


def topological_order(
    nodes: Sequence[onnx.NodeProto], defined: Iterable[str], source: Path
) -> list[onnx.NodeProto]:
    """The nodes in an order where every input is defined before use.

    The ONNX order is kept when it already is one; otherwise ties are broken by the ONNX
    position, so the result is the same on every run.
    """
    producer: dict[str, int] = {}
    for index, node in enumerate(nodes):
        for tensor in node.output:
            if not tensor:
                continue
            if tensor in producer:
                first = nodes[producer[tensor]].name
                raise error(
                    f"{source}: tensor '{tensor}' is written by both '{first}' and '{node.name}'"
                )
            producer[tensor] = index
    available = set(defined)
    for tensor, index in producer.items():  # ONNX is SSA: a graph input is not written
        if tensor in available:
            raise error(f"{source}: tensor '{tensor}' is a graph input or initializer, and "
                        f"node '{nodes[index].name}' writes it too")
    deps: list[set[int]] = []
    for node in nodes:
        needs: set[int] = set()
        for tensor in node.input:
            if not tensor or tensor in available:
                continue
            if tensor not in producer:
                raise error(
                    f"{source}: node '{node.name}' ({node.op_type}) reads '{tensor}', which no "
                    "node, graph input or initializer defines"
                )
            needs.add(producer[tensor])
        deps.append(needs)
    if all(all(d < i for d in needs) for i, needs in enumerate(deps)):
        return list(nodes)
    return [nodes[i] for i in _kahn(deps, nodes, source)]


def _kahn(deps: list[set[int]], nodes: Sequence[onnx.NodeProto], source: Path) -> list[int]:
    users: list[list[int]] = [[] for _ in deps]
    waiting = [len(needs) for needs in deps]
    for index, needs in enumerate(deps):
        for dep in needs:
            users[dep].append(index)
    ready = [i for i, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for user in users[index]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
    if len(order) < len(nodes):
        stuck = sorted(set(range(len(nodes))) - set(order))
        names = ", ".join(f"'{nodes[i].name}'" for i in stuck[:5])
        raise error(f"{source}: the graph has a cycle through nodes {names}")
    return order
