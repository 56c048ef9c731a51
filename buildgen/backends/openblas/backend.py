"""The `openblas` backend: external codegen for the c host, calling OpenBLAS's cblas_sgemm.

It takes MatMul, Gemm and Conv (by im2col) with the elementwise chain after them fused into
the GEMM's epilogue, and generates one readable C module per model. Which OpenBLAS (the
PyPI scipy-openblas32 build, whose symbols carry a `scipy_` prefix, or a plain one) and how
many threads it uses are target attributes (`library`, `threads`); where the library lives
is found at gen (buildgen.backends.libraries) and only reaches compile and link flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from buildgen.backends.base import GeneratedSource, require_c_identifier
from buildgen.backends.cpu_common.groups import chain_reason
from buildgen.backends.openblas.module import Library, LoweredRegion, lower_region, render_module
from buildgen.backends.openblas.support import RULES
from buildgen.errors import error
from buildgen.ir import Graph, Node
from buildgen.partition.model import Partition

if TYPE_CHECKING:
    import numpy as np

_LIBRARIES = {
    "scipy_openblas": ("scipy_", "OpenBLAS from PyPI scipy-openblas32 (symbols prefixed scipy_)"),
    "openblas": ("", "OpenBLAS (cblas_* symbols, -lopenblas)"),
}


@dataclass(frozen=True)
class ScratchSummary:
    """What report.json counts for this module: M__openblas_scratch_bytes."""

    scratch_bytes: int
    unshared_bytes: int


def library_of(options: Mapping[str, object]) -> Library:
    name = str(options.get("library", "scipy_openblas"))
    if name not in _LIBRARIES:
        raise error(f"openblas: unknown library {name!r}; known: {', '.join(sorted(_LIBRARIES))}")
    threads = options.get("threads", 1)
    assert isinstance(threads, int)
    prefix, description = _LIBRARIES[name]
    return Library(prefix, description, threads)


class OpenBLASBackend:
    kind = "openblas"

    def decline_reason(self, node: Node, graph: Graph) -> str | None:
        return chain_reason(node, graph, RULES)

    def lower(
        self,
        graph: Graph,
        partition: Partition,
        library: Library,
        weights: Mapping[str, np.ndarray] | None = None,
    ) -> list[LoweredRegion]:
        lowered: list[LoweredRegion] = []
        kernels = 0
        for region in partition.regions_for(self.kind):
            lowered.append(lower_region(graph, region, kernels, library, weights))
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
        library = library_of(options)
        regions = self.lower(graph, partition, library, weights)
        return GeneratedSource("openblas.c", "c", render_module(model, graph, regions, library))

    def plan_summary(
        self, graph: Graph, partition: Partition, options: Mapping[str, object],
        weights: Mapping[str, np.ndarray] | None = None,
    ) -> ScratchSummary:
        regions = self.lower(graph, partition, library_of(options), weights)
        return ScratchSummary(
            scratch_bytes=max((r.plan.total_bytes for r in regions), default=0),
            unshared_bytes=sum(r.plan.unshared_bytes for r in regions),
        )
