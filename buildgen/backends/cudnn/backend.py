"""The `cudnn` backend: external codegen for the cuda device, through cuDNN.

It takes 1-D and 2-D Conv with the elementwise chain after it, the 1-D and 2-D pools and
Softmax/LogSoftmax, and generates one CUDA module per model (buildgen.backends.cudnn.module).
The math mode (TF32 or not), the workspace limit and how create picks convolution
algorithms are target attributes; tuning records (`buildgen tune --backend cudnn` on a GPU)
name the algorithm each convolution tries first (buildgen.backends.cudnn.algorithms). Where
cuDNN lives is found at gen (backends/gpu_libraries.py) and only reaches compile and link
flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from buildgen.backends.base import GeneratedSource, require_c_identifier
from buildgen.backends.cpu_common.groups import chain_reason
from buildgen.backends.cudnn.algorithms import Recorded, conv_problem, recorded_algorithm
from buildgen.backends.cudnn.lower import ConvCall, lower_group
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

    from buildgen.partition.cost.records import Records

MIB = 1 << 20


def settings_of(options: Mapping[str, object]) -> Settings:
    limit = options.get("workspace_limit_mb", 64)
    assert isinstance(limit, int)
    search = str(options.get("algorithm_search", "heuristic"))
    if search not in ALGORITHM_SEARCH:
        known = ", ".join(ALGORITHM_SEARCH)
        raise error(f"cudnn: unknown algorithm_search {search!r}; known: {known}")
    sm = options.get("sm")
    return Settings(bool(options.get("allow_tf32", False)), limit * MIB, search,
                    sm if isinstance(sm, int) else None)


def recorded_algorithms(regions: list[LoweredRegion], settings: Settings,
                        records: Records | None) -> dict[str, Recorded]:
    """Per convolution call, the fastest algorithm the records hold for it, if any."""
    chosen = {}
    for region in regions:
        for call in region.calls:
            if isinstance(call, ConvCall):
                found = recorded_algorithm(conv_problem(call), settings.sm, settings.math,
                                           settings.workspace_limit_bytes, records)
                if found is not None:
                    chosen[call.name] = found
    return chosen


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
        records: Records | None = None,
    ) -> GeneratedSource:
        require_c_identifier(model)
        regions = self.lower(graph, partition, weights)
        settings = settings_of(options)
        text = render_module(model, graph, regions, settings,
                             recorded_algorithms(regions, settings, records))
        return GeneratedSource("cudnn.cu", "cuda", text)
