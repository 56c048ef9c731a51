"""`buildgen cache stats` and `buildgen cache clean`: the local store, as the build sees it.

The store is found the way actions find it: the manifest's `cache:` section (when the
manifest exists), overridden by BUILDGEN_CACHE_DIR and friends.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

from buildgen.cache.settings import CacheSettings, SettingsError, resolve_settings
from buildgen.errors import BuildgenError, Diagnostic

# What `clean` removes: everything the store wrote, and nothing else in the folder.
_OWNED = ("ac", "cas", "memo", "stats.json", "stats.lock", "evict.lock", "CACHEDIR.TAG")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("stats", "clean"), help="what to do")
    parser.add_argument(
        "--manifest", type=Path, default=Path("BUILD.yaml"),
        help="the manifest whose `cache:` section applies (default: BUILD.yaml, if present)",
    )


def run(args: argparse.Namespace) -> int:
    settings = _settings(args.manifest)
    if args.action == "clean":
        removed = clean(settings.dir)
        print(f"removed {_size(removed)} from {settings.dir}")
        return 0
    for line in stats_lines(settings):
        print(line)
    return 0


def _settings(manifest: Path) -> CacheSettings:
    section: dict[str, object] = {}
    if manifest.is_file():
        from buildgen.cache.settings import settings_file_text
        from buildgen.manifest import load_manifest
        from buildgen.targets import is_known_target

        section = json.loads(settings_file_text(load_manifest(manifest, is_known_target).cache))
    try:
        return resolve_settings(section, os.environ)
    except SettingsError as exc:
        raise BuildgenError(Diagnostic(str(exc))) from None


def stats_lines(settings: CacheSettings) -> list[str]:
    from buildgen.cache.evict import store_files
    from buildgen.cache.stats import OUTCOMES, read_stats

    files = store_files(settings.dir)
    entries = sum(1 for f in files if f"{os.sep}ac{os.sep}" in f.path)
    size = sum(f.size for f in files)
    lines = [
        f"cache folder: {settings.dir}" + ("" if settings.enabled else " (disabled)"),
        f"entries: {entries}   blobs: {len(files) - entries}   "
        f"size: {_size(size)} of {_size(settings.max_size)}",
    ]
    if settings.remote:
        mode = " (read-only)" if settings.read_only else ""
        lines.append(f"remote cache: {settings.remote}{mode}")
    days = read_stats(settings.dir).days
    if days:
        lines.append("day          local  remote     ran  hit rate")
        for day, counts in days:
            count = dict(counts)
            hits = count.get("local", 0) + count.get("remote", 0)
            total = hits + count.get("ran", 0)
            cells = "".join(f"{count.get(o, 0):>8}" for o in OUTCOMES)
            lines.append(f"{day}{cells}  {100 * hits / total if total else 0:>7.0f}%")
    return lines


def clean(folder: Path) -> int:
    """Remove the store's files; returns the bytes removed."""
    from buildgen.cache.evict import store_files

    size = sum(f.size for f in store_files(folder))
    for name in _OWNED:
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()
    return size


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "kB", "MB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"
