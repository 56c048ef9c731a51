"""Keep the local store under its size limit: remove the least recently used files.

A hit touches what it read, so a file's mtime is when it was last stored or used. When
the counted size passes the limit, one process (a non-blocking `flock` of `evict.lock`
elects it; the others carry on) walks the store and removes the oldest action entries and
blobs until the store is at 90% of the limit, leaving room so that not every following
action evicts again. Entries and blobs go by age alike: a reader that finds an entry
whose blob is gone treats it as a miss and runs the action, which stores it again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from buildgen.cache import stats
from buildgen.cache.store import open_lock

LOW_WATER = 0.9
_EVICTABLE = ("ac", "cas")


@dataclass(frozen=True)
class _Entry:
    mtime: int
    size: int
    path: str


def store_files(root: Path) -> list[_Entry]:
    """Every entry and blob of the store (temp files of writes in progress excluded)."""
    found: list[_Entry] = []
    for top in _EVICTABLE:
        for folder, _, names in os.walk(root / top):
            for name in names:
                if name.startswith("."):
                    continue
                path = os.path.join(folder, name)
                with contextlib.suppress(FileNotFoundError):
                    st = os.stat(path)
                    found.append(_Entry(st.st_mtime_ns, st.st_size, path))
    return found


def evict(root: Path, limit: int) -> int | None:
    """Bring the store under `limit` bytes; returns its size afterwards, or None when
    another process is evicting already."""
    root.mkdir(parents=True, exist_ok=True)
    with open_lock(root / "evict.lock") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        try:
            counted_before = stats.counted_size(root)
            entries = store_files(root)
            total = sum(e.size for e in entries)
            if total > limit:
                target = int(limit * LOW_WATER)
                for entry in sorted(entries, key=lambda e: (e.mtime, e.path)):
                    if total <= target:
                        break
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                    total -= entry.size
            stats.set_size(root, total, counted_before)
            return total
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
