"""partition.json: a documented, stable format (docs/partitioning.md, "The partition file")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from buildgen.errors import error
from buildgen.partition.model import Partition, Region, Transfer

PARTITION_FORMAT = 1


def dump_partition(partition: Partition) -> str:
    doc: dict[str, Any] = {
        "format": "buildgen-partition",
        "version": PARTITION_FORMAT,
        "model": partition.model,
        "target": partition.target,
        "graph_digest": partition.graph_digest,
        "regions": [
            {
                "id": r.id,
                "target": r.target,
                "nodes": list(r.nodes),
                "reason": r.reason,
                "pattern": r.pattern,
            }
            for r in partition.regions
        ],
    }
    # Written only where there are any: a host-only partition keeps the bytes (and the
    # digest) it had before transfers were recorded, and older files still load.
    if partition.transfers:
        doc["transfers"] = [
            {"tensor": t.tensor, "from": t.source, "to": t.dest, "before": t.before}
            for t in partition.transfers
        ]
    return json.dumps(doc, sort_keys=True, indent=1) + "\n"


def load_partition(path: str | Path) -> Partition:
    doc = json.loads(Path(path).read_text())
    if doc.get("format") != "buildgen-partition" or doc.get("version") != PARTITION_FORMAT:
        raise error(f"{path}: not a buildgen partition file of version {PARTITION_FORMAT}")
    return Partition(
        model=doc["model"],
        target=doc["target"],
        graph_digest=doc["graph_digest"],
        regions=tuple(
            Region(
                id=r["id"],
                target=r["target"],
                nodes=tuple(r["nodes"]),
                reason=r.get("reason", ""),
                pattern=r.get("pattern", ""),
            )
            for r in doc["regions"]
        ),
        transfers=tuple(
            Transfer(t["tensor"], t["from"], t["to"], t.get("before", ""))
            for t in doc.get("transfers", [])
        ),
    )
