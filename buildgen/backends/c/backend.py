"""The `c` host backend: runs any region it accepts as plain C11 (+ bg_kernels.h).

It generates one readable C module per model: a static function per kernel or fused
group, one exported function per region, intermediates in env->scratch at offsets chosen
by the memory planner. Options other than `threads` (opt_level, march, ...) only affect
compile flags, which live in rules/c.yaml; `threads` sets the size of the thread pool the
module's create starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from buildgen.backends.base import GeneratedSource, require_c_identifier
from buildgen.backends.c.instance import packed_layout
from buildgen.backends.c.kernel import LowerContext
from buildgen.backends.c.lower import LoweredRegion, lower_region, writes_nothing
from buildgen.backends.c.module import render_module
from buildgen.backends.c.registry import op_table
from buildgen.errors import error
from buildgen.ir import Graph, Node
from buildgen.partition.model import Partition

if TYPE_CHECKING:
    import numpy as np



@dataclass(frozen=True)
class RegionMemory:
    region: str
    planned_bytes: int  # scratch this region needs after buffers share bytes
    unshared_bytes: int  # sum of its intermediates' and workspaces' sizes
    buffers: int  # how many buffers were planned


@dataclass(frozen=True)
class MemorySummary:
    """The scratch figures of one model's c module, for reports.

    `scratch_bytes` is M__c_scratch_bytes: the largest region's plan, as regions run one
    at a time. `unshared_bytes` is what the module would need if no two intermediates
    shared bytes and regions did not share scratch."""

    scratch_bytes: int
    unshared_bytes: int
    regions: tuple[RegionMemory, ...]
    packed_bytes: int = 0  # constant operands packed at create, per instance (env->state)


def _empty_reason(node: Node, graph: Graph) -> str | None:
    """Why an op without `handles_empty` cannot run `node`, or None.

    Empty constants (no axes, no pads) are fine; so is a node whose outputs are all empty,
    which is never lowered. An empty data tensor next to non-empty outputs is not."""
    if writes_nothing(node, graph):
        return None
    for name in (*node.inputs, *node.outputs):
        if name and not graph.is_weight(name) and graph.type_of(name).numel == 0:
            return f"zero-size tensor '{name}' not supported by {node.op}"
    return None


class CBackend:
    kind = "c"

    def __init__(self, fuse: bool = True) -> None:
        self.fuse = fuse  # False: one kernel per node (for tests and debugging)

    def decline_reason(self, node: Node, graph: Graph) -> str | None:
        if node.domain not in ("", "ai.onnx"):
            return f"op {node.domain}.{node.op} not implemented"
        entry = op_table().get(node.op)
        if entry is None:
            return f"op {node.op} not implemented"
        if not entry.handles_empty:
            reason = _empty_reason(node, graph)
            if reason:
                return reason
        return entry.check(node, graph)

    def lower(
        self, graph: Graph, partition: Partition, weights: Mapping[str, np.ndarray] | None = None
    ) -> list[LoweredRegion]:
        """Every c region of `partition`, lowered to kernels with a memory plan."""
        ctx = LowerContext(graph, weights)
        lowered: list[LoweredRegion] = []
        kernels = 0
        for region in partition.regions_for(self.kind):
            for name in region.nodes:
                reason = self.decline_reason(graph.node(name), graph)
                if reason is not None:
                    raise error(
                        f"c backend cannot run node '{name}' of region {region.id}: {reason}"
                    )
            lowered.append(lower_region(ctx, region, kernels, fuse=self.fuse))
            kernels += len(lowered[-1].kernel_names)
        return lowered

    def generate(
        self,
        model: str,
        graph: Graph,
        partition: Partition,
        options: Mapping[str, object],
        weights: Mapping[str, np.ndarray] | None = None,
    ) -> GeneratedSource:
        require_c_identifier(model)
        threads = options.get("threads", 1)
        assert isinstance(threads, int)  # the schema says so
        text = render_module(model, graph, self.lower(graph, partition, weights), threads,
                             timed=bool(options.get("profile", False)))
        return GeneratedSource(filename="c.c", language="c", text=text)

    def plan_summary(
        self, graph: Graph, partition: Partition, options: Mapping[str, object],
        weights: Mapping[str, np.ndarray] | None = None,
    ) -> MemorySummary:
        regions = self.lower(graph, partition, weights)
        return MemorySummary(
            packed_bytes=packed_layout(regions)[1],
            scratch_bytes=max((r.plan.total_bytes for r in regions), default=0),
            unshared_bytes=sum(r.plan.unshared_bytes for r in regions),
            regions=tuple(
                RegionMemory(
                    r.region.id, r.plan.total_bytes, r.plan.unshared_bytes, len(r.plan.offsets)
                )
                for r in regions
            ),
        )
