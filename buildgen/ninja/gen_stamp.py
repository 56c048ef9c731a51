"""Whether `buildgen build` may skip gen: a stamp of what gen read that ninja does not track.

ninja re-runs gen itself (build.ninja's generator rule) when the manifest or any of
buildgen's files, rules, schemas or target definitions change. What it cannot see is how
buildgen was started: the interpreter, PYTHONPATH and the environment variables gen
reads, the --manifest/--build-dir arguments, and installed distributions (where oneDNN's
and CUDA's files are found). After each gen, `build` writes a digest of those, plus
build.ninja's size and mtime, to <build>/.buildgen/gen.stamp. The next `build` computes
the digest again (no YAML parser, no schema validator imported: a read, a few stats, a
hash) and, when it matches and build.ninja is the one gen wrote, goes straight to ninja.
Anything else — no stamp, another build.ninja, a changed variable — runs gen, as before.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path

from buildgen.resources import site_folder_stamps

STAMP = ".buildgen/gen.stamp"
FORMAT = "buildgen gen stamp 1"
DEFAULT_BUILD_DIR = "build"
# Environment variables gen's decisions depend on (besides every BUILDGEN_* one): where
# tools and libraries are found, which interpreter and packages run the stages.
_ENVIRONMENT = (
    "PATH", "PYTHONPATH", "VIRTUAL_ENV", "CUDA_HOME", "CUDA_PATH", "LIBRARY_PATH",
    "LD_LIBRARY_PATH", "XDG_CACHE_HOME", "HOME",
)
# A top-level `build_dir:` in the manifest, read without a YAML parser. A guess: a wrong
# one finds no stamp (or one whose digest differs), and gen runs.
_BUILD_DIR_LINE = re.compile(rb"^build_dir:[ \t]*(['\"]?)([^'\"#\r\n]+?)\1[ \t]*(?:#.*)?$", re.M)


def fingerprint(manifest: Path, build_dir_arg: Path | None) -> tuple[str, Path] | None:
    """(digest of gen's untracked inputs, the build dir they imply), or None when the
    manifest cannot be read (gen then reports why)."""
    manifest = Path(os.path.abspath(manifest))
    try:
        text = manifest.read_bytes()
    except OSError:
        return None
    if build_dir_arg is not None:
        build_dir = Path(os.path.abspath(build_dir_arg))
    else:
        found = _BUILD_DIR_LINE.search(text)
        named = found[2].decode(errors="replace") if found else DEFAULT_BUILD_DIR
        build_dir = Path(os.path.normpath(manifest.parent / os.path.expanduser(named)))
    import buildgen

    parts = [
        FORMAT, str(manifest), hashlib.sha256(text).hexdigest(), str(build_dir),
        str(build_dir_arg), sys.executable, sys.version, buildgen.__file__,
        buildgen.__version__,
    ]
    parts += [f"{k}={os.environ.get(k)}" for k in _ENVIRONMENT]
    parts += sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith("BUILDGEN_"))
    parts += [f"{entry}@{'missing' if mtime is None else mtime}"
              for entry, mtime in site_folder_stamps()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest(), build_dir


def fresh_build_dir(manifest: Path, build_dir_arg: Path | None) -> Path | None:
    """The build dir when gen need not run, else None."""
    found = fingerprint(manifest, build_dir_arg)
    if found is None:
        return None
    digest, build_dir = found
    try:
        stamp = (build_dir / STAMP).read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError):
        return None
    return build_dir if stamp == [digest, ninja_file_state(build_dir)] else None


def write_stamp(manifest: Path, build_dir_arg: Path | None, build_dir: Path) -> None:
    """After gen wrote `build_dir`: stamp it, unless the build dir the digest implies is
    another one (a `build_dir:` the guess above does not read): then gen runs every time."""
    from buildgen.fsutil import write_if_changed

    found = fingerprint(manifest, build_dir_arg)
    if found is None or found[1] != build_dir:
        return
    write_if_changed(build_dir / STAMP, f"{found[0]} {ninja_file_state(build_dir)}\n")


def ninja_file_state(build_dir: Path) -> str:
    """build.ninja as gen left it: gen run by ninja, or by hand, with other settings,
    changes it, and the stamp no longer vouches for it."""
    try:
        info = os.stat(build_dir / "build.ninja")
    except OSError:
        return "missing"
    return f"{info.st_size}:{info.st_mtime_ns}:{info.st_ino}"
