"""The partition: the graph's nodes grouped into regions, each with exactly one target.

This is the stable, documented file format between the partition and codegen stages
(`partition.json`). A region's `target` is the single source of truth downstream: once
set (by a pin, or by a user's own pass) nothing overwrites it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Region:
    id: str  # "r0", "r1", ... in execution order; stable for a given graph and target
    target: str  # the backend kind that runs it, e.g. "c", "onednn"
    nodes: tuple[str, ...]  # node names, in the graph's topological order
    reason: str = ""  # why this backend: "host fallback", "pattern onednn.conv_relu", "pin ..."
    pattern: str = ""  # the pattern-table entry that matched, if any


@dataclass(frozen=True)
class Transfer:
    """A tensor copied between the host and a device (buildgen.partition.transfers).

    It follows from the regions and their kinds' devices; the partition records it so the
    report, `explain` and a reader of partition.json see what crosses, and where."""

    tensor: str
    source: str  # device type it is copied from: "cpu" (the host) or a device's, e.g. "cuda"
    dest: str  # device type it is copied to
    before: str  # the region that first reads it there; "" = after the last region (an output)


@dataclass(frozen=True)
class Partition:
    model: str  # the model name from the manifest
    target: str  # the manifest target name, e.g. "cpu"
    graph_digest: str  # sha256 of graph.json this partition was made for
    regions: tuple[Region, ...]
    # Host <-> device copies, in execution order; () on a host-only partition.
    transfers: tuple[Transfer, ...] = ()

    def regions_for(self, backend: str) -> tuple[Region, ...]:
        return tuple(r for r in self.regions if r.target == backend)

    @property
    def backends(self) -> tuple[str, ...]:
        """Backends that own at least one region, in first-use order."""
        seen: list[str] = []
        for region in self.regions:
            if region.target not in seen:
                seen.append(region.target)
        return tuple(seen)
