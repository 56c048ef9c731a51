"""From chosen units (pattern matches, single nodes, a user's fixed regions) to regions.

Both policies end here: units of one backend that touch merge when no cycle between
regions follows; then the units are put in an execution order that keeps a backend's
units together where it can, and consecutive units of one backend merge (always safe:
nothing can run between two neighbours of a topological order). Regions are numbered
r0, r1, ... in that order, their nodes in the graph's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from buildgen.ir import Graph
from buildgen.partition.convexity import NodeGraph
from buildgen.partition.model import Partition, Region
from buildgen.partition.transfers import plan_transfers


@dataclass(frozen=True)
class Unit:
    target: str
    nodes: tuple[int, ...]  # positions in the graph's node order, sorted
    reasons: tuple[str, ...]
    patterns: tuple[str, ...] = ()
    fixed: bool = False  # a region a user wrote: kept exactly, never merged
    # The cost policy's estimates of the unit's kernels: (seconds, where the figure is from).
    costs: tuple[tuple[float, str], ...] = ()


def _unique(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for i in items if i))


def _combine(a: Unit, b: Unit) -> Unit:
    return Unit(
        a.target,
        tuple(sorted((*a.nodes, *b.nodes))),
        _unique((*a.reasons, *b.reasons)),
        _unique((*a.patterns, *b.patterns)),
        costs=(*a.costs, *b.costs),
    )


def _cost_summary(costs: tuple[tuple[float, str], ...]) -> str:
    """"cost 12.3 us over 2 kernels: tuning record cpu.records.json x1, analytic estimate x1"."""
    total = sum(seconds for seconds, _ in costs) * 1e6
    sources: dict[str, int] = {}
    for _, source in costs:
        sources[source] = sources.get(source, 0) + 1
    if len(costs) == 1:
        return f"cost {total:.3g} us: {costs[0][1]}"
    parts = ", ".join(f"{source} x{n}" for source, n in sorted(sources.items()))
    return f"cost {total:.3g} us over {len(costs)} kernels: {parts}"


def _reason(unit: Unit) -> str:
    summary = [_cost_summary(unit.costs)] if unit.costs else []
    return "; ".join((*summary, *unit.reasons))


class _UnitGraph:
    def __init__(self, ng: NodeGraph, units: Sequence[Unit]):
        self.units: dict[int, Unit] = dict(enumerate(units))
        self.owner: dict[int, int] = {n: u for u, unit in self.units.items() for n in unit.nodes}
        self.succ: dict[int, set[int]] = {u: set() for u in self.units}
        self.pred: dict[int, set[int]] = {u: set() for u in self.units}
        for node, succs in enumerate(ng.succs):
            for s in succs:
                a, b = self.owner[node], self.owner[s]
                if a != b:
                    self.succ[a].add(b)
                    self.pred[b].add(a)

    def mergeable(self, a: int, b: int) -> bool:
        ua, ub = self.units[a], self.units[b]
        return ua.target == ub.target and not ua.fixed and not ub.fixed

    def _reaches_indirectly(self, a: int, b: int) -> bool:
        """Whether a path a -> w -> ... -> b exists with w != b."""
        frontier = [w for w in self.succ[a] if w != b]
        seen = set(frontier)
        while frontier:
            w = frontier.pop()
            for x in self.succ[w]:
                if x == b:
                    return True
                if x not in seen:
                    seen.add(x)
                    frontier.append(x)
        return False

    def merge(self, a: int, b: int) -> None:
        """Fold b into a."""
        self.units[a] = _combine(self.units[a], self.units.pop(b))
        for s in self.succ.pop(b):
            self.pred[s].discard(b)
            if s != a:
                self.succ[a].add(s)
                self.pred[s].add(a)
        for p in self.pred.pop(b):
            self.succ[p].discard(b)
            if p != a:
                self.pred[a].add(p)
                self.succ[p].add(a)
        self.succ[a].discard(a)
        self.pred[a].discard(a)

    def merge_touching(self) -> None:
        changed = True
        while changed:
            changed = False
            for a in sorted(self.units):
                if a not in self.units:
                    continue
                again = True
                while again:
                    again = False
                    for b in sorted(self.succ[a]):
                        if self.mergeable(a, b) and not self._reaches_indirectly(a, b):
                            self.merge(a, b)
                            changed = again = True
                            break

    def schedule(self) -> list[Unit]:
        """A topological order of the units that keeps a backend's units together."""
        waiting = {u: len(self.pred[u]) for u in self.units}
        ready = sorted((u for u, n in waiting.items() if n == 0), key=self._key)
        order: list[Unit] = []
        while ready:
            last = order[-1].target if order else None
            pick = next((u for u in ready if self.units[u].target == last), ready[0])
            ready.remove(pick)
            order.append(self.units[pick])
            for s in self.succ[pick]:
                waiting[s] -= 1
                if waiting[s] == 0:
                    ready.append(s)
            ready.sort(key=self._key)
        if len(order) != len(self.units):
            raise RuntimeError("internal error: the regions of a partition form a cycle")
        return order

    def _key(self, u: int) -> int:
        return self.units[u].nodes[0]


def assemble(
    graph: Graph,
    ng: NodeGraph,
    units: Sequence[Unit],
    model: str,
    target: str,
    digest: str,
    *,
    merge: bool = True,
) -> Partition:
    """The partition made of `units` (which must cover every node once, each convex, and
    form no cycle), merged unless `merge` is False."""
    unit_graph = _UnitGraph(ng, units)
    if merge:
        unit_graph.merge_touching()
    order = unit_graph.schedule()
    merged: list[Unit] = []
    for unit in order:
        prev = merged[-1] if merged else None
        if merge and prev and prev.target == unit.target and not prev.fixed and not unit.fixed:
            merged[-1] = _combine(prev, unit)
        else:
            merged.append(unit)
    regions = tuple(
        Region(
            id=f"r{i}",
            target=unit.target,
            nodes=tuple(graph.nodes[n].name for n in unit.nodes),
            reason=_reason(unit),
            pattern=",".join(unit.patterns),
        )
        for i, unit in enumerate(merged)
    )
    return Partition(model=model, target=target, graph_digest=digest, regions=regions,
                     transfers=plan_transfers(graph, regions))
