"""The `cublas` backend: external codegen for the cuda device, through cuBLAS and cuBLASLt.

It takes MatMul and Gemm with the elementwise chain after them and generates one CUDA module
per model (buildgen.backends.cublas.module). The compute type (TF32 or not) and the workspace
are target attributes; where cuBLAS lives is found at gen (backends/gpu_libraries.py) and
only reaches compile and link flags.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from buildgen.backends.base import GeneratedSource
from buildgen.backends.cpu_common.groups import chain_reason
from buildgen.backends.cublas.lower import lower_group
from buildgen.backends.cublas.module import LoweredRegion, Settings, render_module
from buildgen.backends.cublas.support import RULES
from buildgen.backends.gpu_region import region_frame
from buildgen.errors import error
from buildgen.ir import Graph, Node
from buildgen.partition.model import Partition

if TYPE_CHECKING:
    import numpy as np

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
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
        lowered = []
        calls = 0
        for region in partition.regions_for(self.kind):
            frame = region_frame(graph, region, RULES)
            lowered.append(LoweredRegion(frame, tuple(
                lower_group(calls + i, g, graph, weights) for i, g in enumerate(frame.groups))))
            calls += len(frame.groups)
        return lowered

    def generate(
        self,
        model: str,
        graph: Graph,
        partition: Partition,
        options: Mapping[str, object],
        weights: Mapping[str, np.ndarray] | None = None,
    ) -> GeneratedSource:
        if not _IDENTIFIER.fullmatch(model):
            raise error(f"model name {model!r} is not a C identifier")
        regions = self.lower(graph, partition, weights)
        text = render_module(model, graph, regions, settings_of(options))
        return GeneratedSource("cublas.cu", "cuda", text)
