"""The priority policy: each node goes to the first backend, in the target's order, that takes it.

Regions are maximal runs of consecutive nodes (in topological order) on one backend. A run
of a topological order is always convex, so no region depends on itself through another.
"""

from __future__ import annotations

from buildgen.backends.registry import get_backend
from buildgen.errors import BuildgenError, Diagnostic
from buildgen.ir import Graph, Node
from buildgen.partition.model import Partition, Region
from buildgen.targets import ResolvedTarget


def _assign(node: Node, graph: Graph, backends: tuple[str, ...]) -> tuple[str, str] | str:
    """(backend, reason) for the first backend that takes the node, else the refusal message."""
    refusals = []
    for kind in backends:
        reason = get_backend(kind).decline_reason(node, graph)
        if reason is None:
            why = "host" if kind == backends[-1] else f"priority {backends.index(kind) + 1}"
            return kind, why
        refusals.append(f"{kind}: {reason}")
    return (
        f"node {node.name!r} (op {node.op}) is not supported by any backend of the target; "
        f"considered {', '.join(backends)} — " + "; ".join(refusals)
    )


def partition_priority(graph: Graph, target: ResolvedTarget, model: str, digest: str) -> Partition:
    backends = target.backends
    regions: list[Region] = []
    problems: list[Diagnostic] = []
    current: tuple[str, str] | None = None
    members: list[str] = []

    def close() -> None:
        if current and members:
            regions.append(Region(f"r{len(regions)}", current[0], tuple(members), current[1]))

    for node in graph.nodes:
        choice = _assign(node, graph, backends)
        if isinstance(choice, str):
            problems.append(Diagnostic(f"{graph.source or model}: {choice}"))
            continue
        if current is None or choice[0] != current[0]:
            close()
            current, members = choice, []
        members.append(node.name)
    close()
    if problems:
        raise BuildgenError(problems)
    return Partition(model=model, target=target.name, graph_digest=digest, regions=tuple(regions))
