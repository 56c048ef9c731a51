"""The `cuda` device backend: runs the nodes no library accelerator takes as CUDA C++.

One module per model (src/cuda.cu) holds every cuda region: fused elementwise kernels of
its own, launches of the generic kernels of bg_cuda.cuh, and device-to-device copies, all
enqueued on the instance's stream (buildgen_abi.h, device rules). Options (arch, opt_level,
nvcc_flags) only affect nvcc's command line, which rules/cuda.yaml builds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from buildgen.backends.base import GeneratedSource, require_c_identifier
from buildgen.backends.c.backend import MemorySummary, RegionMemory
from buildgen.backends.cuda.lower import LoweredRegion, lower_region
from buildgen.backends.cuda.module import render_module
from buildgen.backends.cuda.support import decline_reason
from buildgen.errors import error
from buildgen.ir import Graph, Node
from buildgen.partition.model import Partition

if TYPE_CHECKING:
    import numpy as np



class CudaBackend:
    kind = "cuda"

    def decline_reason(self, node: Node, graph: Graph) -> str | None:
        return decline_reason(node, graph)

    def lower(
        self, graph: Graph, partition: Partition, weights: Mapping[str, np.ndarray] | None = None
    ) -> list[LoweredRegion]:
        lowered: list[LoweredRegion] = []
        kernels = 0
        for region in partition.regions_for(self.kind):
            for name in region.nodes:
                reason = self.decline_reason(graph.node(name), graph)
                if reason is not None:
                    raise error(
                        f"cuda backend cannot run node '{name}' of region {region.id}: {reason}"
                    )
            lowered.append(lower_region(graph, region, weights, kernels))
            kernels += len(lowered[-1].kernels)
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
        text = render_module(model, graph, self.lower(graph, partition, weights))
        return GeneratedSource(filename="cuda.cu", language="cuda", text=text)

    def plan_summary(
        self, graph: Graph, partition: Partition, options: Mapping[str, object],
        weights: Mapping[str, np.ndarray] | None = None,
    ) -> MemorySummary:
        """The module's device scratch, for reports (the same figures as the c backend's)."""
        regions = self.lower(graph, partition, weights)
        return MemorySummary(
            scratch_bytes=max((r.scratch_bytes for r in regions), default=0),
            unshared_bytes=sum(r.unshared_bytes for r in regions),
            regions=tuple(RegionMemory(r.region.id, r.scratch_bytes, r.unshared_bytes, r.buffers)
                          for r in regions),
        )
