"""The small interface every backend implements.

A backend says which nodes it can run (and why not, for the ones it declines) and turns
all of a model's regions that were given to it into one source module. Its declarative
part (device, compilers, flags, libraries) lives in rules/<kind>.yaml; its attribute
schema in schemas/targets/<kind>.schema.json.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from buildgen.errors import error
from buildgen.ir import Graph, Node

if TYPE_CHECKING:  # annotations only: importing buildgen.partition here would be circular
    import numpy as np

    from buildgen.partition.model import Partition


@dataclass(frozen=True)
class GeneratedSource:
    filename: str  # e.g. "c.c"; unique per model and target
    language: str  # "c", "cxx" or "cuda": picks the compile rule
    text: str


class Backend(Protocol):
    kind: str

    def decline_reason(self, node: Node, graph: Graph) -> str | None:
        """None if this backend can run `node` as it is in `graph`, else a short reason."""
        ...

    def generate(
        self,
        model: str,
        graph: Graph,
        partition: Partition,
        options: Mapping[str, object],
        weights: Mapping[str, np.ndarray] | None = None,
    ) -> GeneratedSource:
        """One module holding every region of `partition` whose target is this backend.

        `weights` (name -> array, e.g. from buildgen.ir.serialize.load_weights) gives the
        values of constant inputs that shape the generated code (Slice starts, Pad pads,
        Reduce axes, scalars worth inlining); a backend that needs them and gets None
        raises a BuildgenError naming the node.

        A kind whose rules declare `tuning:` reads tuning records: its generate() also takes
        `records=` (buildgen.partition.cost.records.Records, or None) and chooses kernel
        variants from them.

        The module follows buildgen_abi.h: for model M and backend B it defines
        M__B_scratch_bytes, M__B_create, M__B_destroy and one M__B_<region id> per region.

        A backend may define `plan_summary(graph, partition, options, weights)` (taking
        `records=` too when it reads them), the memory its module plans, for report.json.
        A backend that makes a choice for the whole module (onednn's activation layout) may
        also define `module_notes(graph, partition, options, records) -> tuple[str, ...]`,
        saying what it chose and why, for `buildgen explain`.
        """
        ...


_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def require_c_identifier(model: str) -> None:
    """Every symbol a module exports starts with the model's name (buildgen_abi.h), so a
    backend's generate() checks it first; the manifest enforces it for its own models."""
    if not _C_IDENTIFIER.fullmatch(model):
        raise error(f"model name {model!r} is not a C identifier")
