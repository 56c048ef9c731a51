"""Convexity: a set of nodes is a valid region only if no path leaves it and comes back.

A non-convex region would have to run both before and after some other region, so the
regions could not be run in any order. Checked on node sets (one candidate region) and on
whole partitions (the graph of regions must be acyclic).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from buildgen.ir import Graph


class NodeGraph:
    """The graph's node-level dependencies by position in its (topological) node order."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.index = {n.name: i for i, n in enumerate(graph.nodes)}
        preds: list[set[int]] = [set() for _ in graph.nodes]
        succs: list[set[int]] = [set() for _ in graph.nodes]
        for i, node in enumerate(graph.nodes):
            for tensor in node.inputs:
                producer = graph.producer(tensor) if tensor else None
                if producer is not None:
                    p = self.index[producer.name]
                    preds[i].add(p)
                    succs[p].add(i)
        self.preds = tuple(tuple(sorted(s)) for s in preds)
        self.succs = tuple(tuple(sorted(s)) for s in succs)

    def is_convex(self, members: Iterable[int]) -> bool:
        """Whether no path from the set leaves it and re-enters it."""
        inside = set(members)
        if not inside:
            return True
        last = max(inside)
        # Nodes outside the set reachable from it; only positions before `last` can lead
        # back in, as edges go forward in a topological order.
        frontier = [s for m in inside for s in self.succs[m] if s not in inside and s < last]
        seen = set(frontier)
        while frontier:
            node = frontier.pop()
            for s in self.succs[node]:
                if s in inside:
                    return False
                if s < last and s not in seen:
                    seen.add(s)
                    frontier.append(s)
        return True

    def positions(self, names: Iterable[str]) -> tuple[int, ...]:
        return tuple(sorted(self.index[n] for n in names))


def region_cycle(graph: Graph, groups: Sequence[Sequence[str]]) -> tuple[int, ...] | None:
    """Indices of groups forming a cycle in the graph of groups, or None if it is acyclic.
    Every node must be in exactly one group."""
    owner: dict[str, int] = {n: g for g, names in enumerate(groups) for n in names}
    edges: dict[int, set[int]] = {g: set() for g in range(len(groups))}
    for node in graph.nodes:
        for tensor in node.inputs:
            producer = graph.producer(tensor) if tensor else None
            if producer is not None and owner[producer.name] != owner[node.name]:
                edges[owner[producer.name]].add(owner[node.name])
    return find_cycle(edges)


def find_cycle(edges: Mapping[int, set[int]]) -> tuple[int, ...] | None:
    """A cycle of a small directed graph, by iterative depth-first search."""
    state: dict[int, int] = {}  # 1: on the stack, 2: done
    for root in sorted(edges):
        if root in state:
            continue
        stack: list[tuple[int, list[int]]] = [(root, sorted(edges[root]))]
        path = [root]
        state[root] = 1
        while stack:
            node, todo = stack[-1]
            if not todo:
                state[node] = 2
                stack.pop()
                path.pop()
                continue
            nxt = todo.pop(0)
            if state.get(nxt) == 1:
                return tuple(path[path.index(nxt):])
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, sorted(edges[nxt])))
    return None
