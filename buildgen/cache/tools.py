"""Who runs an action: the identity of each tool on its command line.

A tool is named by its resolved path and what it says about itself (`cc --version`), so
two compilers at one path in two containers, or one compiler upgraded in place, never
share results. Asking is slow (a process per tool), so the answer is memoized on disk per
path + size + mtime, and every action after the first pays a stat and a small read.

The Python running the stages is identified in-process: its version, the versions of the
libraries the stages use, and a digest of buildgen's own files — an editable checkout
keeps its version number while its code changes, and cached stage outputs must follow.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from buildgen.cache.store import read_regular
from buildgen.fsutil import write_atomic
from buildgen.resources import site_folder_stamps

MEMO_FORMAT = 1
PROBE_TIMEOUT = 60.0  # s: a compiler's --version never takes this long
# What the stages' outputs depend on besides buildgen itself.
_STAGE_DISTRIBUTIONS = ("onnx", "numpy", "pyyaml", "jsonschema")


class Memo:
    """Small JSON values under `folder`, keyed by the sha256 of a fingerprint.

    What this process found is kept in memory too (a worker's runner serves many actions:
    each then pays no read of the entry): a fingerprint stands for the same value wherever
    it is looked up, so the folder it came from does not matter."""

    _known: dict[str, str] = {}
    _LIMIT = 4096

    def __init__(self, folder: Path):
        self.folder = folder

    def get_or_compute(self, fingerprint: object, compute: Callable[[], str]) -> str:
        text = json.dumps([MEMO_FORMAT, fingerprint], sort_keys=True)
        if (known := Memo._known.get(text)) is not None:
            return known
        key = hashlib.sha256(text.encode()).hexdigest()
        value = self._stored(key)
        if value is None:
            value = compute()
            # A read-only or full cache folder costs a probe next time, nothing more.
            with contextlib.suppress(OSError):
                write_atomic(self.folder / key[:2] / key,
                             json.dumps({"format": MEMO_FORMAT, "value": value}))
        if len(Memo._known) >= Memo._LIMIT:
            Memo._known.clear()
        Memo._known[text] = value
        return value

    def _stored(self, key: str) -> str | None:
        data = read_regular(self.folder, (key[:2], key), limit=1 << 20)
        if data is not None:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                return str(json.loads(data)["value"])
        return None


def command_tools(command: Sequence[str]) -> list[tuple[str, str]]:
    """(word, resolved path) of the tools that start `command`: `cc`, `ccache cc`,
    `env VAR=x /usr/bin/python`. The leading words that name executables, skipping
    VAR=value assignments, up to the first option or non-executable word."""
    tools: list[tuple[str, str]] = []
    for word in command:
        if word.startswith("-"):
            break
        if "=" in word and not word.startswith("/"):
            continue
        found = shutil.which(word)
        if found is None:
            if not tools:
                tools.append((word, ""))  # a missing tool: the command will say so
            break
        tools.append((word, os.path.realpath(found)))
    return tools


@functools.cache
def interpreter_path() -> str:
    """This interpreter's resolved path: asked for by every action's key, and a realpath
    is an lstat per folder of it."""
    return os.path.realpath(sys.executable)


def tool_identity(path: str, memo: Memo) -> str:
    """A digest of `path`'s identity: this interpreter in-process, any other tool by its
    `--version` output, memoized per path + size + mtime."""
    if not path:
        return "missing"
    if path == interpreter_path():
        return python_identity(memo)
    stat = os.stat(path)
    fingerprint = ["tool", path, stat.st_size, stat.st_mtime_ns]
    return memo.get_or_compute(fingerprint, lambda: _probe(path))


def _probe(path: str) -> str:
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, timeout=PROBE_TIMEOUT, check=False,
            stdin=subprocess.DEVNULL,
        )
        said = done.stdout + b"\0" + done.stderr + b"\0" + str(done.returncode).encode()
    except (OSError, subprocess.TimeoutExpired) as exc:
        said = f"unprobed: {type(exc).__name__}".encode()
    return hashlib.sha256(path.encode() + b"\0" + said).hexdigest()


def python_identity(memo: Memo) -> str:
    """This interpreter, the distributions the stages import, and buildgen's files."""
    import buildgen

    package = Path(buildgen.__file__).resolve().parent
    files = _package_files(package)
    fingerprint = [
        "python", sys.version, interpreter_path(), buildgen.__version__,
        [list(stamp) for stamp in site_folder_stamps()],
        [[str(f), s.st_size, s.st_mtime_ns] for f, s in files],
    ]
    return memo.get_or_compute(fingerprint, lambda: _python_digest(package, files))


def _package_files(package: Path) -> list[tuple[Path, os.stat_result]]:
    from buildgen.resources import buildgen_files

    # The cache's own code decides where outputs come from, never what they are (what a
    # key covers is versioned by KEY_FORMAT), nor does the worker that runs actions:
    # editing either must not void every stage entry.
    skip = (package / "cache", package / "worker")
    return [(path, path.stat()) for path in buildgen_files(skip)]


def _python_digest(package: Path, files: list[tuple[Path, os.stat_result]]) -> str:
    from importlib import metadata

    digest = hashlib.sha256(sys.version.encode())
    for dist in _STAGE_DISTRIBUTIONS:
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"\0{dist}={version}".encode())
    for path, _ in files:
        # Named relative to the package's parent: the digest must not depend on where
        # buildgen is installed, only on what it is.
        name = os.path.relpath(path, package.parent)
        digest.update(b"\0" + name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def native_cpu() -> str:
    """A digest of this machine's processor model and features (for `-march=native`)."""
    described = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "flags", "Features", "CPU part")):
                    described += line
                elif not line.strip() and described:
                    break  # the first processor says it for all
    except OSError:
        import platform

        described = f"{platform.machine()} {platform.processor()}"
    return hashlib.sha256(described.encode()).hexdigest()


def library_search_dirs(compiler: str, memo: Memo) -> list[str]:
    """The folders `compiler` (resolved) searches for `-l` libraries by default."""
    if not compiler:
        return []
    stat = os.stat(compiler)

    def ask() -> str:
        try:
            done = subprocess.run(
                [compiler, "-print-search-dirs"], capture_output=True, text=True,
                timeout=PROBE_TIMEOUT, check=False, stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired):
            return json.dumps([])
        for line in done.stdout.splitlines():
            if line.startswith("libraries:"):
                dirs = line.partition("=")[2].split(os.pathsep)
                return json.dumps([os.path.normpath(d) for d in dirs if d])
        return json.dumps([])

    fingerprint = ["search-dirs", compiler, stat.st_size, stat.st_mtime_ns]
    return list(json.loads(memo.get_or_compute(fingerprint, ask)))
