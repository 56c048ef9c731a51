"""Partitioning: which backend runs which nodes.

The policy modules (and the backend registry they consult) load only when a partition is
made, so stages that merely read partition.json start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from buildgen.partition.model import Partition, Region

if TYPE_CHECKING:
    from buildgen.ir import Graph
    from buildgen.targets import ResolvedTarget


def partition_graph(graph: Graph, target: ResolvedTarget, model: str, digest: str) -> Partition:
    from buildgen.partition.priority import partition_priority

    return partition_priority(graph, target, model, digest)


__all__ = ["Partition", "Region", "partition_graph"]
