"""The one lookup for data shipped with buildgen (rules/, schemas/, C headers, CMake files).

In a repository checkout the folders sit at the top of the repo; in an installed wheel
they are the packages buildgen._rules and buildgen._schemas. Never relative to the cwd.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from functools import cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def _shipped(package: str, repo_folder: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            if Path(location).is_dir():
                return Path(location)
    return _PACKAGE_DIR.parent / repo_folder


@cache
def rules_dir() -> Path:
    return _shipped("buildgen._rules", "rules")


@cache
def schemas_dir() -> Path:
    return _shipped("buildgen._schemas", "schemas")


def include_dir() -> Path:
    """C headers shared by generated sources (the module ABI, C kernels)."""
    return _PACKAGE_DIR / "include"


def cmake_dir() -> Path:
    return _PACKAGE_DIR / "cmake"


_SOURCE_SUFFIXES = (".py", ".h", ".cuh", ".yaml", ".json", ".cmake", ".in", ".S", ".c")


def buildgen_files(skip: tuple[Path, ...] = ()) -> list[Path]:
    """Every file of buildgen's own (code, headers, rules, schemas), sorted; folders in
    `skip` left out. What a worker's identity and the cache's key of Python stages hash."""
    found: set[Path] = set()
    for top in (_PACKAGE_DIR, rules_dir(), schemas_dir()):
        for folder, dirs, names in os.walk(top):
            dirs[:] = sorted(
                d for d in dirs
                if d != "__pycache__" and not d.startswith(".") and Path(folder, d) not in skip
            )  # fmt: skip
            found.update(
                Path(folder, name) for name in names
                if name.endswith(_SOURCE_SUFFIXES) and not name.startswith(".")
            )  # fmt: skip
    return sorted(found)


def site_folder_stamps() -> list[tuple[str, int | None]]:
    """(folder, mtime in ns, or None if it is gone) for each site folder on sys.path.

    Installing or upgrading a distribution changes its site folder's mtime, so these say
    whether what the stages import may have changed. Only `*-packages` folders: `python -m`
    puts the build dir on sys.path too, and its mtime changes constantly.
    """
    stamps: list[tuple[str, int | None]] = []
    for entry in sys.path:
        if "-packages" in entry:
            try:
                stamps.append((entry, os.stat(entry).st_mtime_ns))
            except OSError:
                stamps.append((entry, None))
    return stamps
