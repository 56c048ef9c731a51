"""The `cublas` backend: external codegen for the cuda device, through cuBLAS and cuBLASLt.

It takes MatMul and Gemm with the elementwise chain after them and generates one CUDA module
per model (buildgen.backends.cublas.module). The compute type (TF32 or not) and the workspace
are target attributes; where cuBLAS lives is found at gen (backends/gpu_libraries.py) and
only reaches compile and link flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from buildgen.backends.base import GeneratedSource, require_c_identifier
from buildgen.backends.cpu_common.groups import chain_reason
from buildgen.backends.cublas.lower import lower_group
from buildgen.backends.cublas.module import LoweredRegion, Settings, render_module
from buildgen.backends.cublas.support import RULES
from buildgen.backends.gpu_region import lower_regions
from buildgen.ir import Graph, Node
from buildgen.partition.model import Partition

if TYPE_CHECKING:
    import numpy as np

MIB = 1 << 20


def settings_of(options: Mapping[str, object]) -> Settings:
    workspace = options.get("workspace_mb", 32)
    assert isinstance(workspace, int)
    return Settings(bool(options.get("allow_tf32", False)), workspace * MIB)


class CublasBackend:
    kind = "cublas"

    def decline_reason(self, node: Node, graph: Graph) -> str | None:
        return chain_reason(node, graph, RULES)

    def lower(self, graph: Graph, partition: Partition,
              weights: Mapping[str, np.ndarray] | None = None) -> list[LoweredRegion]:
        return lower_regions(graph, partition, self.kind, RULES,
                             lambda i, group: lower_group(i, group, graph, weights),
                             LoweredRegion)

    def generate(
        self,
        model: str,
        graph: Graph,
        partition: Partition,
        options: Mapping[str, object],
        weights: Mapping[str, np.ndarray] | None = None,
    ) -> GeneratedSource:
        require_c_identifier(model)
        regions = self.lower(graph, partition, weights)
        text = render_module(model, graph, regions, settings_of(options))
        return GeneratedSource("cublas.cu", "cuda", text)
