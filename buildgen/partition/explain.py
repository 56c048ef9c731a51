"""Why each region runs where it does: for `buildgen explain` and the HTML report.

The partition file records each region's reason (the pattern that matched, the pin, the
cost and where it came from, the user's file or step). For the nodes the host runs, this
adds what every other backend of the target said about each of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from buildgen.backends.registry import get_backend
from buildgen.ir import Graph, Node
from buildgen.partition.candidates import has_patterns
from buildgen.partition.cost.records import Records
from buildgen.partition.matcher import why_unmatched
from buildgen.partition.model import Partition
from buildgen.targets import ResolvedTarget, get_kind


@dataclass(frozen=True)
class NodeNote:
    name: str
    op: str
    declined: tuple[tuple[str, str], ...]  # (kind, what it said), for nodes the host runs


@dataclass(frozen=True)
class RegionNote:
    id: str
    target: str
    role: str  # "host", "device" or "accelerator"
    reason: str
    pattern: str
    nodes: tuple[NodeNote, ...]
    copies: tuple[str, ...] = ()  # host <-> device copies made before it runs


@dataclass(frozen=True)
class Explanation:
    model: str
    target: str
    backends: tuple[str, ...]  # the target's, in priority order
    regions: tuple[RegionNote, ...]
    final_copies: tuple[str, ...] = ()  # outputs copied back to the host after the last region
    # (kind, note): what a backend's codegen chose for its whole module, and why
    module_notes: tuple[tuple[str, str], ...] = ()


def what_others_said(graph: Graph, node: Node, target: ResolvedTarget) -> tuple[
    tuple[str, str], ...
]:
    """Each non-host backend's answer for a node the host runs."""
    said = []
    for kind in target.backends:
        if kind == target.host_kind:
            continue
        reason = get_backend(kind).decline_reason(node, graph)
        if reason is None and has_patterns(kind):
            reason = "accepts the op; " + why_unmatched(graph, get_kind(kind).patterns, node)
        said.append((kind, reason if reason is not None else "accepts it"))
    return tuple(said)


def _copies(graph: Graph, partition: Partition, before: str) -> tuple[str, ...]:
    return tuple(
        f"'{t.tensor}' {t.source} -> {t.dest}, {graph.type_of(t.tensor).nbytes} bytes"
        for t in partition.transfers if t.before == before
    )


def _module_notes(graph: Graph, target: ResolvedTarget, partition: Partition,
                  records: Records | None) -> tuple[tuple[str, str], ...]:
    """Each backend's choices for its module, from the options and (for a kind whose codegen
    reads them) the tuning records its codegen gets."""
    notes = []
    for kind in partition.backends:
        say = getattr(get_backend(kind), "module_notes", None)
        if say is not None:
            read = records if get_kind(kind).reads_records else None
            notes += [(kind, note)
                      for note in say(graph, partition, target.codegen_options(kind), read)]
    return tuple(notes)


def explain(graph: Graph, target: ResolvedTarget, partition: Partition,
            records: Records | None = None) -> Explanation:
    """`records`: the model's tuning records, when it names a file that exists."""
    regions = []
    for region in partition.regions:
        on_host = region.target == target.host_kind
        nodes = tuple(
            NodeNote(name, graph.node(name).op,
                     what_others_said(graph, graph.node(name), target) if on_host else ())
            for name in region.nodes
        )
        regions.append(RegionNote(region.id, region.target, get_kind(region.target).role.value,
                                  region.reason, region.pattern, nodes,
                                  _copies(graph, partition, region.id)))
    return Explanation(partition.model, partition.target, target.backends, tuple(regions),
                       _copies(graph, partition, ""),
                       _module_notes(graph, target, partition, records))


def render_text(expl: Explanation) -> str:
    lines = [
        f"{expl.model} for target {expl.target}: {len(expl.regions)} region(s); backends in "
        f"priority order: {' > '.join(expl.backends)}",
    ]
    for r in expl.regions:
        lines += [
            "",
            f"{r.id}  {r.target} ({r.role}), {len(r.nodes)} node(s)",
            f"    why: {r.reason or 'not recorded'}",
        ]
        if r.pattern:
            lines.append(f"    pattern: {r.pattern}")
        lines += [f"    copied in: {c}" for c in r.copies]
        for n in r.nodes:
            lines.append(f"    - {n.name} ({n.op})")
            for kind, said in n.declined:
                lines.append(f"        {kind}: {said}")
    if expl.final_copies:
        lines += ["", "after the last region:"]
        lines += [f"    copied out: {c}" for c in expl.final_copies]
    if expl.module_notes:
        lines += ["", "module choices:"]
        lines += [f"    {kind}: {note}" for kind, note in expl.module_notes]
    return "\n".join(lines) + "\n"


def to_json(expl: Explanation) -> dict[str, Any]:
    return {
        "model": expl.model,
        "target": expl.target,
        "backends": list(expl.backends),
        "regions": [
            {
                "id": r.id, "target": r.target, "role": r.role, "reason": r.reason,
                "pattern": r.pattern,
                "nodes": [{"name": n.name, "op": n.op, "declined": dict(n.declined)}
                          for n in r.nodes],
                "copies": list(r.copies),
            }
            for r in expl.regions
        ],
        "final_copies": list(expl.final_copies),
        "module_notes": [{"backend": kind, "note": note} for kind, note in expl.module_notes],
    }
