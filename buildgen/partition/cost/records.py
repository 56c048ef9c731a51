"""Tuning records: measured run times of candidate kernels, one JSON file a manifest names.

    {"format": "buildgen-tuning-records", "version": 1,
     "records": [{"key": {...}, "seconds": 1.9e-05, "runs": 200, "machine": "..."}, ...]}

A record may also say how much workspace the kernel needed ("workspace_bytes", written only
when not zero): a cuDNN convolution algorithm is taken only within the target's limit.

Records are sorted by their key's canonical text and carry no timestamps, so merging the
same measurements gives the same bytes. `buildgen tune` writes them; the cost policy reads
them (the file is an input of the partition action, so new records re-partition).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from buildgen.errors import error
from buildgen.limits import read_json
from buildgen.partition.cost.keys import key_text

RECORDS_FORMAT = "buildgen-tuning-records"
RECORDS_VERSION = 1


@dataclass(frozen=True)
class Record:
    key: str  # canonical key text (buildgen.partition.cost.keys.key_text)
    seconds: float  # time of one call, the runtime's call overhead removed
    runs: int  # how many runs the median is of
    machine: str = ""  # what measured it, for people reading the file
    workspace_bytes: int = 0  # device workspace the kernel ran with


@dataclass(frozen=True)
class Records:
    by_key: Mapping[str, Record]
    source: str = ""  # the file's name, for explanations

    def lookup(self, key: Mapping[str, Any]) -> Record | None:
        return self.by_key.get(key_text(key))

    def merged(self, new: Iterable[Record]) -> Records:
        """These records with `new` ones added; a new record replaces an old one."""
        table = dict(self.by_key)
        table.update((r.key, r) for r in new)
        return Records(table, self.source)

    def dump(self) -> str:
        """One record per line (sorted by key), so a diff of the file shows what changed."""
        lines = [json.dumps(_entry(r), sort_keys=True) for _, r in sorted(self.by_key.items())]
        head = (f'{{"format": "{RECORDS_FORMAT}", "version": {RECORDS_VERSION}, '
                '"records": [')
        return head + "\n" + ",\n".join(lines) + ("\n" if lines else "") + "]}\n"


def _entry(record: Record) -> dict[str, Any]:
    entry: dict[str, Any] = {"key": json.loads(record.key),
                             "seconds": float(f"{record.seconds:.4g}"), "runs": record.runs,
                             "machine": record.machine}
    if record.workspace_bytes:
        entry["workspace_bytes"] = record.workspace_bytes
    return entry


def empty_records(source: str = "") -> Records:
    return Records({}, source)


def optional_records(path: str | Path | None) -> Records | None:
    """The records a stage's `--records` names: None when it names none. An empty path is
    none too: argparse's default and the stage API's `records=""` both mean "no records"."""
    return load_records(path) if path else None


def records_or_empty(path: Path) -> Records:
    """The records `buildgen tune` adds to: the file's, or none before its first run."""
    return load_records(path) if path.exists() else empty_records(path.name)


def model_records(path: Path | None) -> Records | None:
    """The records a model's `partition.records` names, as its build reads them: None when
    it names none or the file is not written yet (buildgen/ninja/awaited_records.py)."""
    return load_records(path) if path is not None and path.exists() else None


def load_records(path: str | Path) -> Records:
    path = Path(path)
    doc = read_json(path, "tuning records")
    if not isinstance(doc, dict) or doc.get("format") != RECORDS_FORMAT:
        raise error(f"{path}: not a buildgen tuning-records file",
                    hint="`buildgen tune` writes one")
    if doc.get("version") != RECORDS_VERSION:
        raise error(f"{path}: tuning records of version {doc.get('version')!r}; this buildgen "
                    f"reads version {RECORDS_VERSION}", hint="re-run `buildgen tune`")
    table: dict[str, Record] = {}
    for index, item in enumerate(doc.get("records", [])):
        try:
            record = Record(key_text(item["key"]), float(item["seconds"]), int(item["runs"]),
                            str(item.get("machine", "")), int(item.get("workspace_bytes", 0)))
        except (KeyError, TypeError, ValueError):
            raise error(f"{path}: records[{index}] needs 'key', 'seconds' and 'runs'") from None
        table[record.key] = record
    return Records(table, path.name)
