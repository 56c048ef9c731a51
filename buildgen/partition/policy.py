"""What a partition policy gets and gives, and the failure every policy reports alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from buildgen.backends.registry import get_backend
from buildgen.errors import Diagnostic
from buildgen.ir import Graph, Node
from buildgen.partition.candidates import has_patterns
from buildgen.partition.convexity import NodeGraph
from buildgen.partition.matcher import why_unmatched
from buildgen.partition.pins import PinnedNode
from buildgen.targets import ResolvedTarget, get_kind


@dataclass(frozen=True)
class PolicyInput:
    graph: Graph
    ng: NodeGraph  # the graph's dependencies, by node position
    target: ResolvedTarget
    pins: Mapping[str, PinnedNode]  # node name -> its pin
    taken: frozenset[int] = frozenset()  # nodes of regions a user fixed: not the policy's

    def free(self) -> list[int]:
        return [i for i in range(len(self.graph.nodes)) if i not in self.taken]


def refusals(graph: Graph, node: Node, target: ResolvedTarget) -> list[str]:
    """What each backend of the target says about `node`: its decline reason, or for a kind
    with a pattern table that took nothing, why its patterns did not match."""
    said = []
    for kind in target.backends:
        reason = get_backend(kind).decline_reason(node, graph)
        if reason is None and has_patterns(kind) and kind != target.host_kind:
            reason = why_unmatched(graph, get_kind(kind).patterns, node)
        said.append(f"{kind}: {reason if reason is not None else 'accepts it'}")
    return said


def unsupported(graph: Graph, model: str, node: Node, target: ResolvedTarget) -> Diagnostic:
    return Diagnostic(
        f"{graph.source or model}: node {node.name!r} (op {node.op}) is not supported by any "
        f"backend of the target; considered {', '.join(target.backends)} — "
        + "; ".join(refusals(graph, node, target))
    )
