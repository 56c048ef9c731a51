"""Partitioning: which backend runs which nodes.

    partition_graph(graph, target, model, digest, options)   the partition (see pipeline)
    Partition, Region                                          partition.json's content

The policy modules (and the backend registry they consult) load only when a partition is
made, so stages that merely read partition.json start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from buildgen.partition.model import Partition, Region

if TYPE_CHECKING:
    from buildgen.ir import Graph
    from buildgen.partition.pipeline import PartitionOptions
    from buildgen.targets import ResolvedTarget


def partition_graph(
    graph: Graph, target: ResolvedTarget, model: str, digest: str,
    options: PartitionOptions | None = None,
) -> Partition:
    """Partition `graph` for `target`: the default (priority) policy unless `options`
    says otherwise (pins, the cost policy and its records, a partition file, a step)."""
    from buildgen.partition.pipeline import PartitionOptions, make_partition

    return make_partition(graph, target, model, digest, options or PartitionOptions())


__all__ = ["Partition", "Region", "partition_graph"]
