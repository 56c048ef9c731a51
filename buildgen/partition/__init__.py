"""Partitioning: which backend runs which nodes."""

from __future__ import annotations

from buildgen.ir import Graph
from buildgen.partition.model import Partition, Region
from buildgen.partition.priority import partition_priority
from buildgen.targets import ResolvedTarget


def partition_graph(graph: Graph, target: ResolvedTarget, model: str, digest: str) -> Partition:
    return partition_priority(graph, target, model, digest)


__all__ = ["Partition", "Region", "partition_graph"]
