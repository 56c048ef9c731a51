"""Candidate regions: what each backend of a target offers to run.

A kind with a pattern table offers its pattern matches; a kind without one (the host, a
device, a plug-in accelerator that declares none) offers every single node its backend's
decline_reason accepts. For the cost policy the host also offers, as one fused kernel,
every chain some accelerator's pattern matched (the c host fuses a bias and activation
into its GEMM): so "this chain on the host" is compared with "this chain on openblas".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from buildgen.backends.registry import get_backend
from buildgen.ir import Graph
from buildgen.partition.convexity import NodeGraph
from buildgen.partition.matcher import find_matches
from buildgen.partition.pins import PinnedNode
from buildgen.targets import ResolvedTarget, get_kind


@dataclass(frozen=True)
class Candidate:
    backend: str
    nodes: tuple[int, ...]  # graph positions, sorted
    pattern: str = ""  # "<kind>.<name>" of the pattern-table entry, if one matched
    priority: int = 0  # the pattern's priority
    declared: int = 0  # the pattern's place in its table

    @property
    def claim_order(self) -> tuple[int, int, int, int]:
        """Higher priority, more nodes, declared earlier, earlier in the graph."""
        return (-self.priority, -len(self.nodes), self.declared, self.nodes[0])


def has_patterns(kind: str) -> bool:
    return bool(get_kind(kind).patterns)


def pattern_candidates(graph: Graph, ng: NodeGraph, kind: str) -> list[Candidate]:
    return [
        Candidate(kind, ng.positions(m.nodes), m.pattern.qualified_name, m.pattern.priority,
                  m.pattern.index)
        for m in find_matches(graph, get_kind(kind).patterns)
    ]


def node_candidates(graph: Graph, kind: str) -> list[Candidate]:
    backend = get_backend(kind)
    return [
        Candidate(kind, (i,))
        for i, node in enumerate(graph.nodes)
        if backend.decline_reason(node, graph) is None
    ]


def offers(graph: Graph, ng: NodeGraph, kind: str, *, host: bool) -> list[Candidate]:
    """What `kind` offers as an accelerator (patterns, if it has a table) or as the host."""
    if has_patterns(kind) and not host:
        return pattern_candidates(graph, ng, kind)
    return node_candidates(graph, kind)


def allowed(candidate: Candidate, graph: Graph, pins: Mapping[str, PinnedNode],
            taken: set[int]) -> bool:
    """Whether no node of the candidate is taken, or pinned to another backend."""
    for i in candidate.nodes:
        if i in taken:
            return False
        pin = pins.get(graph.nodes[i].name)
        if pin is not None and pin.kind != candidate.backend:
            return False
    return True


def all_candidates(
    graph: Graph, ng: NodeGraph, target: ResolvedTarget, pins: Mapping[str, PinnedNode],
    taken: set[int],
) -> list[Candidate]:
    """Every backend's offers (the host's fused chains included) that respect pins and
    leave `taken` nodes alone, without duplicates, in a deterministic order."""
    host = target.host_kind
    found: dict[tuple[str, tuple[int, ...]], Candidate] = {}
    chains: list[Candidate] = []
    for kind in target.backends:
        for cand in offers(graph, ng, kind, host=kind == host):
            if len(cand.nodes) > 1:
                chains.append(cand)
            found.setdefault((kind, cand.nodes), cand)
    host_backend = get_backend(host)
    for chain in chains:
        nodes = [graph.nodes[i] for i in chain.nodes]
        if all(host_backend.decline_reason(n, graph) is None for n in nodes):
            found.setdefault((host, chain.nodes), Candidate(host, chain.nodes))
    rank = {kind: i for i, kind in enumerate(target.backends)}
    kept = [c for c in found.values() if allowed(c, graph, pins, taken)]
    kept.sort(key=lambda c: (c.nodes[0], rank[c.backend], -len(c.nodes), c.pattern, c.nodes))
    return kept
