"""The priority policy (the default): accelerators claim in the composite's order.

Each accelerator (then the device) claims, in its claiming order (pattern priority, larger
matches, declaration order, graph position), every candidate whose nodes are still free,
not pinned elsewhere, and that forms no cycle with the claims before it. Pinned nodes its
patterns did not cover become single-node claims of their backend. The host takes the
rest. Claims of one backend then merge where no cycle follows (buildgen.partition.regions).
"""

from __future__ import annotations

from buildgen.backends.registry import get_backend
from buildgen.errors import BuildgenError, Diagnostic
from buildgen.partition.candidates import Candidate, allowed, offers
from buildgen.partition.convexity import region_cycle
from buildgen.partition.policy import PolicyInput, unsupported
from buildgen.partition.regions import Unit
from buildgen.targets import get_kind
from buildgen.targets.kinds import Role


def _pin_reasons(inp: PolicyInput, nodes: tuple[int, ...]) -> list[str]:
    pins = [inp.pins.get(inp.graph.nodes[i].name) for i in nodes]
    return [p.pin.describe() for p in pins if p is not None]


def _claim_reason(cand: Candidate, rank: int) -> str:
    if cand.pattern:
        return f"pattern {cand.pattern} (priority {cand.priority})"
    if get_kind(cand.backend).role is Role.DEVICE:
        return f"the device ({cand.backend}), which accepts the node (no pattern table)"
    return f"accelerator {rank} of the target, which accepts the node (no pattern table)"


def _forms_cycle(inp: PolicyInput, units: list[Unit], cand: Candidate) -> bool:
    """Whether claiming `cand` (with every other node alone) would make regions cyclic:
    a convex candidate can still close a cycle through two earlier claims."""
    if not inp.ng.is_convex(cand.nodes):
        return True
    claimed = {n for u in units for n in u.nodes} | set(cand.nodes)
    groups = [list(u.nodes) for u in units] + [list(cand.nodes)]
    groups += [[i] for i in range(len(inp.graph.nodes)) if i not in claimed]
    names = [[inp.graph.nodes[i].name for i in g] for g in groups]
    return region_cycle(inp.graph, names) is not None


def partition_priority(inp: PolicyInput, model: str) -> list[Unit]:
    """Units covering every node not in `inp.taken`."""
    graph, target = inp.graph, inp.target
    taken = set(inp.taken)
    units: list[Unit] = []
    for rank, kind in enumerate(target.backends[:-1], start=1):
        claims = [c for c in offers(graph, inp.ng, kind, host=False)]
        claims.sort(key=lambda c: c.claim_order)
        for cand in claims:
            if not allowed(cand, graph, inp.pins, taken):
                continue
            # Chains are convex by construction and single nodes trivially; the cycle
            # check matters for multi-node claims next to earlier ones.
            if len(cand.nodes) > 1 and _forms_cycle(inp, units, cand):
                continue
            reasons = [_claim_reason(cand, rank), *_pin_reasons(inp, cand.nodes)]
            units.append(Unit(kind, cand.nodes, tuple(reasons), (cand.pattern,)))
            taken.update(cand.nodes)
        for i, node in enumerate(graph.nodes):
            pinned = inp.pins.get(node.name)
            if i not in taken and pinned is not None and pinned.kind == kind:
                units.append(Unit(kind, (i,), (pinned.pin.describe(),)))
                taken.add(i)
    host = target.host_kind
    backend = get_backend(host)
    problems: list[Diagnostic] = []
    for i, node in enumerate(graph.nodes):
        if i in taken:
            continue
        pinned = inp.pins.get(node.name)
        if pinned is not None:  # pinned to the host: resolve_pins checked that it can
            units.append(Unit(host, (i,), (pinned.pin.describe(),)))
        elif backend.decline_reason(node, graph) is None:
            units.append(Unit(host, (i,), ("host fallback",)))
        else:
            problems.append(unsupported(graph, model, node, target))
    if problems:
        raise BuildgenError(problems)
    return units
