"""The cost policy (Collage-style): the cheapest cover by candidates of every backend.

Candidates come from every backend, the host included (buildgen.partition.candidates);
each is costed from a tuning record when one has its key, else by the analytic model;
the cheapest cover, moving tensors between devices included, is found by a shortest-path
search (buildgen.partition.cost.search). Pins restrict the candidates: a pinned node is
only covered by its backend's candidates.
"""

from __future__ import annotations

from dataclasses import dataclass

from buildgen.errors import BuildgenError, error
from buildgen.ir import Graph
from buildgen.partition.candidates import Candidate, all_candidates
from buildgen.partition.cost.analytic import cost_model, estimate_seconds
from buildgen.partition.cost.keys import backend_options, kernel_key
from buildgen.partition.cost.records import Records, empty_records
from buildgen.partition.cost.search import PICOSECONDS, cheapest_cover
from buildgen.partition.policy import PolicyInput, unsupported
from buildgen.partition.regions import Unit
from buildgen.targets import ResolvedTarget, get_kind

ANALYTIC = "analytic estimate"


@dataclass(frozen=True)
class Estimate:
    seconds: float
    source: str  # "tuning record <file>" or "analytic estimate"


class CostTable:
    """Estimates of candidates on one graph and target, from records or the analytic model."""

    def __init__(self, graph: Graph, target: ResolvedTarget, records: Records | None):
        self.graph = graph
        self.target = target
        self.records = records or empty_records()
        self._options = {k: backend_options(target, k) for k in target.backends}
        for kind in target.backends:
            needed = {a.name for a in get_kind(kind).attributes if a.affects != "none"}
            missing = needed - set(self._options[kind])
            if missing:
                raise error(
                    f"the cost policy needs every attribute of target {target.name!r}; "
                    f"{kind} lacks {', '.join(sorted(missing))}",
                    hint="give the partition stage target.json, not options/target.json",
                )

    def key(self, cand: Candidate) -> dict[str, object]:
        nodes = [self.graph.nodes[i] for i in cand.nodes]
        return kernel_key(self.graph, nodes, cand.backend, cand.pattern,
                          self._options[cand.backend])

    def estimate(self, cand: Candidate) -> Estimate:
        record = self.records.lookup(self.key(cand))
        if record is not None:
            # A record is the kernel alone (`buildgen tune` removes the cost of calling
            # it from Python); a call inside a compiled model costs the kind's call_us.
            where = f" {self.records.source}" if self.records.source else ""
            call = cost_model(cand.backend).call_us * 1e-6
            return Estimate(record.seconds + call, f"tuning record{where}")
        nodes = tuple(self.graph.nodes[i] for i in cand.nodes)
        return Estimate(estimate_seconds(self.graph, nodes, cand.backend), ANALYTIC)


def cost_candidates(inp: PolicyInput) -> list[Candidate]:
    """Every backend's candidates over the free nodes, plus a single-node candidate on its
    backend for each pinned node (a pin must be coverable even where no pattern matched)."""
    cands = all_candidates(inp.graph, inp.ng, inp.target, inp.pins, set(inp.taken))
    present = {(c.backend, c.nodes) for c in cands}
    for i in inp.free():
        pinned = inp.pins.get(inp.graph.nodes[i].name)
        if pinned is not None and (pinned.kind, (i,)) not in present:
            cands.append(Candidate(pinned.kind, (i,)))
    return cands


def partition_cost(inp: PolicyInput, model: str, records: Records | None) -> list[Unit]:
    graph = inp.graph
    cands = cost_candidates(inp)
    covered = {i for c in cands for i in c.nodes}
    missing = [unsupported(graph, model, graph.nodes[i], inp.target)
               for i in inp.free() if i not in covered]
    if missing:
        raise BuildgenError(missing)
    table = CostTable(graph, inp.target, records)
    estimates = [table.estimate(c) for c in cands]
    done = 0
    for i in inp.taken:
        done |= 1 << i
    try:
        chosen = cheapest_cover(graph, cands, [round(e.seconds * PICOSECONDS) for e in estimates],
                                inp.target.host_kind, done)
    except ValueError:
        raise error(
            f"{graph.source or model}: the cost policy found no way to cover the graph with "
            "the candidates of its backends and the pins given",
            hint="try the priority policy, or check pins that split a pattern",
        ) from None
    units = []
    for index in chosen:
        cand, est = cands[index], estimates[index]
        pins = [inp.pins.get(graph.nodes[i].name) for i in cand.nodes]
        reasons = tuple(p.pin.describe() for p in pins if p is not None)
        units.append(Unit(cand.backend, cand.nodes, reasons, (cand.pattern,),
                          costs=((est.seconds, est.source),)))
    return units
