"""The `onednn` backend: external codegen for the c host, through oneDNN's primitives.

It takes Conv, MatMul and Gemm with the elementwise chain after them as post-ops; the
pooling, softmax, layer-normalization and LRN ops; the Resize / Upsample variants oneDNN's
resampling reproduces; LSTM, GRU and RNN with constant weights. It generates one C module
per model whose create function builds every primitive once (weights reordered into the
layouts the primitives prefer) and whose region functions only execute them. Threads and the fpmath
mode are target attributes; where oneDNN lives is found at gen (backends/libraries.py) and
only reaches compile and link flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from buildgen.backends.base import GeneratedSource, require_c_identifier
from buildgen.backends.cpu_common.groups import chain_reason
from buildgen.backends.onednn.module import (
    FPMATH,
    LAYOUTS,
    LoweredRegion,
    Settings,
    lower_region,
    render_module,
)
from buildgen.backends.onednn.support import RULES
from buildgen.backends.onednn.tuned_layout import (
    AUTO,
    DEFAULT,
    TunedLayout,
    has_layout_choice,
    tuned_layout,
)
from buildgen.errors import error
from buildgen.ir import Graph, Node
from buildgen.partition.model import Partition

if TYPE_CHECKING:
    import numpy as np

    from buildgen.partition.cost.records import Records


@dataclass(frozen=True)
class ScratchSummary:
    """What report.json counts for this module: M__onednn_scratch_bytes (the arena part;
    reordered weights and oneDNN's scratchpad are allocated by create on top)."""

    scratch_bytes: int
    unshared_bytes: int


def settings_of(options: Mapping[str, object], tuned: TunedLayout | None = None) -> Settings:
    """The module's settings; `tuned`: what tuning records chose for `activation_layout:
    auto` (None: no records for this module, so the default layout)."""
    threads = options.get("threads", 1)
    fpmath = str(options.get("fpmath_mode", "strict"))
    layout = str(options.get("activation_layout", AUTO))
    assert isinstance(threads, int)
    if fpmath not in FPMATH:
        raise error(f"onednn: unknown fpmath_mode {fpmath!r}; known: {', '.join(FPMATH)}")
    if layout not in (*LAYOUTS, AUTO):
        known = ", ".join((*LAYOUTS, AUTO))
        raise error(f"onednn: unknown activation_layout {layout!r}; known: {known}")
    origin = "set on the target"
    if layout == AUTO:
        layout = tuned.layout if tuned else DEFAULT
        origin = tuned.describe() if tuned else "auto, no tuning records for this module"
    return Settings(threads, fpmath, layout, timed=bool(options.get("profile", False)),
                    layout_origin=origin)


def module_settings(graph: Graph, partition: Partition, options: Mapping[str, object],
                    records: Records | None) -> Settings:
    """The settings the module is generated with: its options, and the layout `records`
    chose for `activation_layout: auto` (buildgen.backends.onednn.tuned_layout)."""
    return settings_of(options, tuned_layout(graph, partition, options, records))


class OneDNNBackend:
    kind = "onednn"

    def decline_reason(self, node: Node, graph: Graph) -> str | None:
        return chain_reason(node, graph, RULES)

    def lower(
        self,
        graph: Graph,
        partition: Partition,
        weights: Mapping[str, np.ndarray] | None = None,
        settings: Settings | None = None,
    ) -> list[LoweredRegion]:
        settings = settings or settings_of({})
        lowered: list[LoweredRegion] = []
        kernels = 0
        for region in partition.regions_for(self.kind):
            lowered.append(lower_region(graph, region, kernels, weights, settings))
            kernels += len(lowered[-1].blocks)
        return lowered

    def generate(
        self,
        model: str,
        graph: Graph,
        partition: Partition,
        options: Mapping[str, object],
        weights: Mapping[str, np.ndarray] | None = None,
        records: Records | None = None,
    ) -> GeneratedSource:
        """The module; `records` (`buildgen tune --backend onednn`) choose the layout of
        `activation_layout: auto` (buildgen.backends.onednn.tuned_layout)."""
        require_c_identifier(model)
        settings = module_settings(graph, partition, options, records)
        regions = self.lower(graph, partition, weights, settings)
        text = render_module(model, graph, regions, settings)
        return GeneratedSource("onednn.c", "c", text)

    def module_notes(
        self, graph: Graph, partition: Partition, options: Mapping[str, object],
        records: Records | None = None,
    ) -> tuple[str, ...]:
        """The layout the module keeps activations in, and why (as `onednn.c` says)."""
        if not has_layout_choice(graph, partition):
            return ()
        settings = module_settings(graph, partition, options, records)
        return (f"activation layout: {settings.layout} ({settings.layout_origin})",)

    def plan_summary(
        self, graph: Graph, partition: Partition, options: Mapping[str, object],
        weights: Mapping[str, np.ndarray] | None = None, records: Records | None = None,
    ) -> ScratchSummary:
        """Planned as codegen plans it: in the layout `options` and `records` choose (a
        blocked layout's tensors are planned at an upper bound)."""
        settings = module_settings(graph, partition, options, records)
        regions = self.lower(graph, partition, weights, settings)
        return ScratchSummary(
            scratch_bytes=max((r.layout.plan.total_bytes for r in regions), default=0),
            unshared_bytes=sum(r.layout.plan.unshared_bytes for r in regions),
        )
