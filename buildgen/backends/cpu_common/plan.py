"""The scratch plan of one region run as groups: the tensors passed between its groups and
the groups' workspaces, placed by buildgen.codegen.memplan so that buffers whose lifetimes do
not overlap share bytes. A step of the plan is one group, in execution order."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from buildgen.backends.cpu_common.groups import Group
from buildgen.codegen.memplan import Buffer, MemoryPlan, plan_memory
from buildgen.ir import Graph
from buildgen.partition.boundaries import RegionIO


@dataclass(frozen=True)
class Workspace:
    name: str  # unique within the region, e.g. "k3_im2col"
    group: int  # the group (plan step) that uses it
    size: int  # bytes


def internal_tensors(groups: Sequence[Group], io: RegionIO) -> tuple[str, ...]:
    """Group outputs that stay inside the region (everything else lives in in[]/out[])."""
    return tuple(g.output for g in groups if g.output not in io.outputs)


def plan_groups(
    graph: Graph,
    groups: Sequence[Group],
    io: RegionIO,
    tensor_bytes: Callable[[str], int],
    workspaces: Sequence[Workspace] = (),
    aliases: Mapping[str, str] | None = None,
    side_outputs: Mapping[str, int] | None = None,
) -> MemoryPlan:
    """Offsets in env->scratch of every internal tensor and workspace. `aliases` maps a
    tensor to the (internal) tensor whose bytes it takes over when that one dies (an output
    accumulated in place onto its residual): both then hold one buffer for both lifetimes.
    `side_outputs` maps more tensors a group writes (an LSTM's Y_h) to its step."""
    aliases = dict(aliases or {})
    internal = set(internal_tensors(groups, io))
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for name, step in (side_outputs or {}).items():
        if name not in io.outputs:
            internal.add(name)
            first[name] = step
    for step, group in enumerate(groups):
        if group.output in internal:
            first[group.output] = step
        for name in group.reads(graph):
            if name in internal:
                last[name] = step

    def root(tensor: str) -> str:
        while tensor in aliases:
            tensor = aliases[tensor]
        return tensor

    span: dict[str, tuple[int, int, int]] = {}  # root -> (bytes, first, last)
    for t in first:
        size, lo, hi = tensor_bytes(t), first[t], max(first[t], last.get(t, first[t]))
        if root(t) in span:
            have = span[root(t)]
            size, lo, hi = max(size, have[0]), min(lo, have[1]), max(hi, have[2])
        span[root(t)] = (size, lo, hi)
    buffers = [Buffer(t, size, lo, hi) for t, (size, lo, hi) in span.items()]
    buffers += [Buffer(w.name, w.size, w.group, w.group) for w in workspaces]
    plan = plan_memory(buffers)
    offsets = dict(plan.offsets)
    offsets.update({t: offsets[root(t)] for t in first if root(t) != t})
    return MemoryPlan(offsets, plan.total_bytes, plan.unshared_bytes)
