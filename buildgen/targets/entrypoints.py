"""Plug-ins' entry points (buildgen.kinds, buildgen.backends), remembered between runs.

importlib.metadata finds entry points by reading the metadata of every distribution on
sys.path: ~10 ms, plus ~15 ms to import it (it brings email, csv and zipfile), paid by
every gen to learn, nearly always, that no plug-in is installed. What it finds depends
only on the distributions on sys.path, and installing, upgrading or removing one changes
the folder it lives in. So the answer is kept in the user's cache folder under a digest
of sys.path and each entry's mtime, and read again only when one of them changes. A
folder modified in the last two seconds may change again within its mtime's resolution
(as git's "racily clean" index entries): then the answer is used but not kept.

Loading a plug-in still goes through importlib.metadata's EntryPoint.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.fsutil import owned_privately, write_atomic

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

# The groups buildgen reads: target kinds' definition folders and backends' classes.
GROUPS = ("buildgen.kinds", "buildgen.backends")
_FORMAT = "buildgen entry points 1"
_RACY_SECONDS = 2.0

Found = dict[str, list[tuple[str, str]]]  # group -> (name, value) pairs


def entry_points(group: str) -> list[EntryPoint]:
    """The installed entry points of `group` (one of GROUPS)."""
    pairs = _found().get(group, [])
    if not pairs:
        return []
    from importlib.metadata import EntryPoint

    return [EntryPoint(name, value, group) for name, value in pairs]


def forget() -> None:
    """After installing a plug-in in this process, or in tests."""
    _found.cache_clear()


@cache
def _found() -> Found:
    key, racy = _installation_key()
    path = _cache_file()
    if path is not None and owned_privately(path):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            kept = json.loads(path.read_text(encoding="utf-8"))
            if kept["key"] == key:
                return {group: [(name, value) for name, value in pairs]
                        for group, pairs in kept["groups"].items()}
    found = _scan()
    if path is not None and not racy:
        with contextlib.suppress(OSError):
            write_atomic(path, json.dumps({"key": key, "groups": found}, sort_keys=True))
    return found


def _scan() -> Found:
    from importlib.metadata import entry_points as installed

    return {group: sorted({(ep.name, ep.value) for ep in installed(group=group)})
            for group in GROUPS}


def _installation_key() -> tuple[str, bool]:
    """(digest of the interpreter, sys.path and each entry's mtime, whether one of those
    folders changed too recently to trust its mtime)."""
    parts = [_FORMAT, sys.executable, sys.version]
    newest = 0
    for entry in sys.path:
        try:
            mtime = os.stat(entry or ".").st_mtime_ns
        except OSError:
            mtime = -1
        parts.append(f"{entry}\0{mtime}")
        newest = max(newest, mtime)
    racy = newest >= (time.time() - _RACY_SECONDS) * 1e9
    return hashlib.sha256("\n".join(parts).encode()).hexdigest(), racy


def _cache_file() -> Path | None:
    """In a private folder: a plug-in named there is imported."""
    from buildgen.cache.settings import private_subfolder

    folder = private_subfolder("plugins")
    return folder / "entry-points.json" if folder is not None else None
