"""The `cudnn` backend: external codegen for the cuda device, through cuDNN.

It takes 1-D and 2-D Conv with the elementwise chain after it, the 1-D and 2-D pools and
Softmax/LogSoftmax, and generates one CUDA module per model (buildgen.backends.cudnn.module).
The math mode (TF32 or not), the workspace limit and how create picks convolution
algorithms are target attributes; where cuDNN lives is found at gen
(backends/gpu_libraries.py) and only reaches compile and link flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from buildgen.backends.base import GeneratedSource, require_c_identifier
from buildgen.backends.cpu_common.groups import chain_reason
from buildgen.backends.cudnn.lower import lower_group
from buildgen.backends.cudnn.module import (
    ALGORITHM_SEARCH,
    LoweredRegion,
    Settings,
    render_module,
)
from buildgen.backends.cudnn.support import RULES
from buildgen.backends.gpu_region import lower_regions
from buildgen.errors import error
from buildgen.ir import Graph, Node
from buildgen.partition.model import Partition

if TYPE_CHECKING:
    import numpy as np

MIB = 1 << 20


def settings_of(options: Mapping[str, object]) -> Settings:
    limit = options.get("workspace_limit_mb", 64)
    assert isinstance(limit, int)
    search = str(options.get("algorithm_search", "heuristic"))
    if search not in ALGORITHM_SEARCH:
        known = ", ".join(ALGORITHM_SEARCH)
        raise error(f"cudnn: unknown algorithm_search {search!r}; known: {known}")
    return Settings(bool(options.get("allow_tf32", False)), limit * MIB, search)


class CudnnBackend:
    kind = "cudnn"

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
        return GeneratedSource("cudnn.cu", "cuda", text)
