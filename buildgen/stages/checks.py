"""Consistency checks between stage files; a mismatch means a stale or foreign input."""

from __future__ import annotations

from buildgen.errors import error
from buildgen.partition.model import Partition
from buildgen.partition.serialize import load_partition


def load_checked_partition(path: str, model: str, digest: str) -> Partition:
    """partition.json, checked to belong to `model` and to the graph whose digest is given."""
    partition = load_partition(path)
    if partition.model != model:
        raise error(f"{path}: partition of model {partition.model!r}, expected {model!r}")
    if partition.graph_digest != digest:
        raise error(
            f"{path}: made for a different graph.json (digest {partition.graph_digest[:12]}…)",
            hint="rebuild with ninja so the partition is redone",
        )
    return partition
