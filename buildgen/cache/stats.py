"""The store's counters: hits and misses per day, and the bytes it holds.

Many actions (processes) of one or several builds update the file at once, so each update
is a read-modify-write under an exclusive `flock` of `stats.lock`. The byte count only
grows between evictions (cheap: no folder walk per action); an eviction walks the store
and sets it to the truth again.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from buildgen.cache.store import exclusive_lock, read_regular
from buildgen.fsutil import write_atomic

STATS_FILE = "stats.json"
STATS_FORMAT = 1
OUTCOMES = ("local", "remote", "ran")  # restored from the local store, from the remote, run


@dataclass(frozen=True)
class Stats:
    bytes: int  # the store's size as last counted (grows with stores, reset by eviction)
    days: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]  # day -> outcome -> count


def _locked(root: Path) -> contextlib.AbstractContextManager[None]:
    return exclusive_lock(root / "stats.lock")


def _read(root: Path) -> dict[str, object]:
    try:
        data = read_regular(root, (STATS_FILE,), limit=1 << 20)
        if data is None:
            raise OSError("no stats file")
        document = json.loads(data)
        if document.get("format") == STATS_FORMAT:
            return dict(document)
    except (OSError, ValueError, AttributeError):
        pass
    return {"format": STATS_FORMAT, "bytes": 0, "days": {}}


def record(root: Path, outcome: str | None, added_bytes: int) -> int:
    """Count one action's outcome (None: count nothing) and the bytes it stored; returns
    the store's size as now counted."""
    with _locked(root):
        document = _read(root)
        size = int(document.get("bytes", 0)) + added_bytes  # type: ignore[call-overload]
        document["bytes"] = size
        if outcome is not None:
            days = document.setdefault("days", {})
            assert isinstance(days, dict)
            day = days.setdefault(time.strftime("%Y-%m-%d", time.gmtime()), {})
            day[outcome] = day.get(outcome, 0) + 1
        write_atomic(root / STATS_FILE, json.dumps(document, sort_keys=True))
    return size


def counted_size(root: Path) -> int:
    with _locked(root):
        return int(_read(root).get("bytes", 0))  # type: ignore[call-overload]


def set_size(root: Path, measured: int, counted_before: int) -> None:
    """The store measured `measured` bytes by a walk that began when the count was
    `counted_before`: what other builds recorded since then is added back, not lost. (A
    file stored during the walk may count twice: an eviction a little early, never a store
    over its limit.)"""
    with _locked(root):
        document = _read(root)
        since = int(document.get("bytes", 0)) - counted_before  # type: ignore[call-overload]
        document["bytes"] = measured + max(since, 0)
        write_atomic(root / STATS_FILE, json.dumps(document, sort_keys=True))


def read_stats(root: Path) -> Stats:
    document = _read(root)
    days = document.get("days", {})
    assert isinstance(days, dict)
    return Stats(
        bytes=int(document.get("bytes", 0)),  # type: ignore[call-overload]
        days=tuple(
            (day, tuple(sorted((k, int(v)) for k, v in counts.items())))
            for day, counts in sorted(days.items())
        ),
    )
