"""Making a partition: regions fixed by a user, then pins, then the policy, then a step.

    fixed regions (a partition file)  kept exactly; their nodes are not the policy's
    pins                              restrict the policy; checked against fixed regions
    policy                            priority (default) or cost covers the other nodes
    step                              a user's function may rewrite the result; what it
                                      sets is kept and the rest is redone the same way
Every region ends with exactly one `target`, and a target that was set is never replaced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from buildgen.errors import error
from buildgen.ir import Graph
from buildgen.partition.convexity import NodeGraph, region_cycle
from buildgen.partition.cost.records import Records
from buildgen.partition.custom import Step, fixed_units, run_step
from buildgen.partition.model import Partition, Region
from buildgen.partition.pins import resolve_pins
from buildgen.partition.policy import PolicyInput
from buildgen.partition.regions import Unit, assemble
from buildgen.targets import ResolvedTarget

POLICIES = ("priority", "cost")


@dataclass(frozen=True)
class PartitionOptions:
    """How to partition, as the stage's command line (or a Python caller) says."""

    pins: tuple[tuple[str, str], ...] = ()  # (node pattern, backend kind or "host")
    policy: str = "priority"
    records: Records | None = None  # tuning records for the cost policy
    start: tuple[Region, ...] = ()  # regions from a partition file (targets may be empty)
    start_origin: str = "partition file"
    step: Step | None = None
    step_name: str = ""  # "module:function", for reasons and messages


def _policy_units(inp: PolicyInput, model: str, options: PartitionOptions) -> list[Unit]:
    if options.policy == "priority":
        from buildgen.partition.priority import partition_priority

        return partition_priority(inp, model)
    if options.policy == "cost":
        from buildgen.partition.cost.policy import partition_cost

        return partition_cost(inp, model, options.records)
    raise error(f"unknown partition policy {options.policy!r}; known: {', '.join(POLICIES)}")


def _check_acyclic(graph: Graph, units: Sequence[Unit], origin: str) -> None:
    groups = [[graph.nodes[i].name for i in u.nodes] for u in units]
    cycle = region_cycle(graph, groups)
    if cycle is not None:
        held = ["[" + ", ".join(repr(graph.nodes[i].name) for i in units[u].nodes[:4]) + "]"
                for u in cycle]
        raise error(
            f"the regions set by {origin or 'the policy'} and the nodes around them depend on "
            "each other in "
            f"a cycle ({' -> '.join(held)}), so no order could run them",
            hint="put the nodes between them into one of the regions, or split the regions",
        )


def complete(
    graph: Graph, target: ResolvedTarget, model: str, digest: str,
    options: PartitionOptions, start: Sequence[Region], origin: str,
) -> Partition:
    """The partition keeping every region of `start` that has a target, the policy
    covering the rest."""
    pins = resolve_pins(graph, target, options.pins)
    ng = NodeGraph(graph)
    fixed = fixed_units(graph, ng, target, start, origin, pins)
    taken = frozenset(i for u in fixed for i in u.nodes)
    units = list(fixed)
    if len(taken) < len(graph.nodes):
        units += _policy_units(PolicyInput(graph, ng, target, pins, taken), model, options)
    _check_acyclic(graph, units, origin)
    return assemble(graph, ng, units, model, target.name, digest)


def make_partition(
    graph: Graph, target: ResolvedTarget, model: str, digest: str,
    options: PartitionOptions = PartitionOptions(),
) -> Partition:
    partition = complete(graph, target, model, digest, options, options.start,
                         options.start_origin)
    if options.step is None:
        return partition
    origin = f"step {options.step_name}"
    regions = run_step(options.step, options.step_name, graph, target, partition)
    return complete(graph, target, model, digest, options, regions, origin)
