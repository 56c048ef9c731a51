"""`activation_layout: auto`: the layout a onednn module keeps its activations in, from
tuning records.

Which layout is faster depends on the model, not on any one convolution: channels-last
suits oneDNN's brgemm convolutions on most models, a channel-blocked layout (`any`) suits
convolutions with few input channels (SqueezeNet's fire modules) but sends mixed-layout
Concats to oneDNN's reference code (DenseNet-121). So `buildgen tune --backend onednn`
builds the model with each candidate and times the whole library
(buildgen.backends.onednn.tune), and records one time per layout under a key naming the
module's regions by structure (ops, attributes, shapes: no model or tensor name) and the
attributes that change its speed. Codegen takes the fastest recorded layout when every
candidate has a record, and channels-last otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from buildgen.backends.onednn.layout import region_layout
from buildgen.ir import Graph
from buildgen.partition.cost.keys import kernel_key, key_digest
from buildgen.partition.cost.records import Records
from buildgen.partition.model import Partition

AUTO = "auto"
CANDIDATES = ("channels_last", "any")  # `plain` (NCHW) never won: it is not measured
DEFAULT = "channels_last"
# The attributes besides the layout that change which layout is faster.
KEYED_OPTIONS = ("threads", "fpmath_mode")


@dataclass(frozen=True)
class TunedLayout:
    layout: str
    seconds: tuple[tuple[str, float], ...]  # per candidate, as recorded
    source: str  # the records file, for the module's comment

    def describe(self) -> str:
        times = ", ".join(f"{name} {_milliseconds(s)} ms" for name, s in self.seconds)
        return f"tuning records {self.source}: {times}"


def _milliseconds(seconds: float) -> str:
    """Three significant digits, never an exponent: 0.406, 75.7, 2348."""
    ms = seconds * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def has_layout_choice(graph: Graph, partition: Partition) -> bool:
    """Whether a tensor of the onednn module can take the activation layout: a module with
    none (GEMMs, a lone convolution between host regions) builds the same under every
    layout, so there is nothing to tune or to explain."""
    return any(entry.flexible for region in partition.regions_for("onednn")
               for entry in region_layout(graph, region).tensors)


def module_digest(graph: Graph, partition: Partition) -> str:
    """The onednn regions of `partition` by structure: the same for the same model under any
    name, and for a model whose weight values changed."""
    keys = [key_digest(kernel_key(graph, tuple(graph.node(n) for n in region.nodes), "onednn",
                                  "", {}))
            for region in partition.regions_for("onednn")]
    return key_digest({"regions": keys})


def layout_key(digest: str, layout: str, options: Mapping[str, Any]) -> dict[str, Any]:
    return {"backend": "onednn", "choice": "activation_layout", "module": digest,
            "layout": layout, "options": {k: options.get(k) for k in KEYED_OPTIONS}}


def tuned_layout(graph: Graph, partition: Partition, options: Mapping[str, Any],
                 records: Records | None) -> TunedLayout | None:
    """The fastest candidate, when `records` time every one for this module."""
    if records is None or not partition.regions_for("onednn"):
        return None
    digest = module_digest(graph, partition)
    seconds = []
    for layout in CANDIDATES:
        record = records.lookup(layout_key(digest, layout, options))
        if record is None:
            return None
        seconds.append((layout, record.seconds))
    fastest = min(seconds, key=lambda pair: pair[1])[0]  # ties: the earlier, channels-last
    return TunedLayout(fastest, tuple(seconds), records.source)
