"""The cheapest cover of the graph by candidates: a shortest path over partial covers.

A state is the set of nodes covered so far (plus, on targets with a device, which live
tensors sit on a non-host device). From a state, the next step covers the first uncovered
node, in the graph's topological order, with a candidate that contains it, whose nodes are
all uncovered and whose inputs are all computed: so every path is an execution order and
no cover it finds has a cycle between regions. A step costs the candidate's time plus
moving its inputs from other devices (and its graph outputs back to the host). Dijkstra
finds the cheapest full cover (Collage's search, without its pruning).

Costs are integers (picoseconds), so sums are exact; among covers of equal cost the one
whose sequence of candidate ranks is smallest wins, so the result is deterministic.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from buildgen.ir import Graph
from buildgen.partition.candidates import Candidate
from buildgen.partition.cost.analytic import transfer_seconds
from buildgen.targets import get_kind
from buildgen.targets.kinds import HOST_DEVICE

PICOSECONDS = 1e12
State = tuple[int, frozenset[tuple[str, str]]]  # covered nodes, tensors away from the host


@dataclass(frozen=True)
class _Prepared:
    mask: int  # bit i: node i belongs to the candidate
    needs: int  # producers of its inputs, outside it
    inputs: tuple[str, ...]  # non-weight tensors it reads from outside
    outputs: tuple[str, ...]  # tensors it produces
    kind: str
    device: str


def _prepare(graph: Graph, position: dict[str, int], cand: Candidate) -> _Prepared:
    mask = 0
    for i in cand.nodes:
        mask |= 1 << i
    members = {graph.nodes[i].name for i in cand.nodes}
    produced = [t for i in cand.nodes for t in graph.nodes[i].outputs if t]
    inputs: list[str] = []
    needs = 0
    for i in cand.nodes:
        for t in graph.nodes[i].inputs:
            if not t or graph.is_weight(t) or t in produced or t in inputs:
                continue
            inputs.append(t)
            producer = graph.producer(t)
            if producer is not None and producer.name not in members:
                needs |= 1 << position[producer.name]
    return _Prepared(mask, needs, tuple(inputs), tuple(produced), cand.backend,
                     get_kind(cand.backend).device)


class _Transfers:
    """Where live tensors are, and what moving them costs."""

    def __init__(self, graph: Graph, host: str):
        self.graph = graph
        self.host = host
        self.readers: dict[str, int] = {}
        for i, node in enumerate(graph.nodes):
            for t in node.inputs:
                if t:
                    self.readers[t] = self.readers.get(t, 0) | (1 << i)
        self.outputs = set(graph.output_names)

    def step(
        self, prep: _Prepared, covered: int, away: frozenset[tuple[str, str]]
    ) -> tuple[int, frozenset[tuple[str, str]]]:
        """(cost in ps, tensors away from the host afterwards) of running `prep` next."""
        where = dict(away)
        seconds = 0.0
        for t in prep.inputs:
            source = where.get(t, self.host)
            if get_kind(source).device != prep.device:
                seconds += transfer_seconds(self.graph.type_of(t).nbytes, (source, prep.kind))
        if prep.device != HOST_DEVICE:
            for t in prep.outputs:
                if t in self.outputs:
                    seconds += transfer_seconds(self.graph.type_of(t).nbytes,
                                                (prep.kind, self.host))
                where[t] = prep.kind
        covered |= prep.mask
        live = frozenset(
            (t, kind) for t, kind in where.items()
            if self.readers.get(t, 0) & ~covered and get_kind(kind).device != HOST_DEVICE
        )
        return round(seconds * PICOSECONDS), live


def cheapest_cover(
    graph: Graph, candidates: Sequence[Candidate], costs_ps: Sequence[int], host: str,
    done_mask: int = 0,
) -> list[int]:
    """Indices of the candidates of the cheapest cover of every node not in `done_mask`
    (those nodes belong to regions fixed before), in execution order. Raises ValueError
    when no cover exists."""
    position = {n.name: i for i, n in enumerate(graph.nodes)}
    preps = [_prepare(graph, position, c) for c in candidates]
    by_node: list[list[int]] = [[] for _ in graph.nodes]
    for index, cand in enumerate(candidates):
        for i in cand.nodes:
            by_node[i].append(index)
    transfers = _Transfers(graph, host)
    full = (1 << len(graph.nodes)) - 1
    start: State = (done_mask, frozenset())
    heap: list[tuple[int, tuple[int, ...], int, State]] = [(0, (), 0, start)]
    parent: dict[State, tuple[State, int] | None] = {start: None}
    settled: set[State] = set()
    best: dict[State, tuple[int, tuple[int, ...]]] = {start: (0, ())}
    counter = 0
    while heap:
        cost, ranks, _, state = heapq.heappop(heap)
        covered, away = state
        if state in settled:
            continue
        settled.add(state)
        if covered == full:
            return _path(parent, state)
        first = (~covered & (covered + 1)).bit_length() - 1
        for index in by_node[first]:
            prep = preps[index]
            if prep.mask & covered or prep.needs & ~covered:
                continue
            moved, live = transfers.step(prep, covered, away)
            nxt: State = (covered | prep.mask, live)
            key = (cost + costs_ps[index] + moved, (*ranks, index))
            if nxt in settled or (nxt in best and best[nxt] <= key):
                continue
            best[nxt] = key
            parent[nxt] = (state, index)
            counter += 1
            heapq.heappush(heap, (key[0], key[1], counter, nxt))
    raise ValueError("no cover of the graph by the candidates")


def _path(parent: dict[State, tuple[State, int] | None], state: State) -> list[int]:
    chosen: list[int] = []
    link = parent[state]
    while link is not None:
        state, index = link
        chosen.append(index)
        link = parent[state]
    return chosen[::-1]
