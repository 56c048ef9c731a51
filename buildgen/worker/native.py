"""The worker client compiled from client.c: an action's start without an interpreter's.

Measured on a cache hit of a compile (the mlp example's model.o, 15 runs, this 2-core
machine): 30 ms through client.py, 17 ms through this client; the difference is the
interpreter's start, which even `python -S` with C modules only pays on every action.

gen writes it into the build folder (right after the folder's mark, before build.ninja),
named by the digest of its source, so an edited client.c is rebuilt and an unchanged one
never is; it is one of gen's outputs, so ninja runs gen again if it goes missing. Where no
C compiler works (or BUILDGEN_WORKER_CLIENT=python), build.ninja starts actions through
client.py, as before: the two speak the same protocol.

The compiled program is also kept in the user's worker folder (private to the user, see
client.worker_dir), named by the source's digest and the compiler's path, size and mtime:
compiling it took 0.15 s of the 0.5 s gen of a new one-model project, every new project.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from buildgen.fsutil import write_atomic
from buildgen.worker.client import worker_dir

SOURCE = Path(__file__).with_name("client.c")
ENV_CLIENT = "BUILDGEN_WORKER_CLIENT"  # python: start actions through client.py
_HOW = "static, else dynamic"  # how _compile links: in the kept client's name


def client_name() -> str | None:
    """The client's path in the build dir, or None: actions start through client.py."""
    if os.environ.get(ENV_CLIENT, "").lower() == "python":
        return None
    try:
        digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    except OSError:
        return None
    return f".buildgen/worker-client-{digest}"


def compiled_client() -> bytes | None:
    """client.c compiled by the C compiler here (CC, else cc), or None when that fails."""
    compiler = shutil.which(os.environ.get("CC") or "cc")
    if compiler is None:
        return None
    kept = _kept_path(compiler)
    if kept is not None:
        with contextlib.suppress(OSError):
            return kept.read_bytes()
    binary = _compile(compiler)
    if binary is not None and kept is not None:
        with contextlib.suppress(OSError):
            write_atomic(kept, binary, executable=True)
    return binary


def _kept_path(compiler: str) -> Path | None:
    """Where this machine keeps the client compiled by `compiler`, or None (no safe folder)."""
    folder = worker_dir()
    if folder is None:
        return None
    try:
        info = os.stat(compiler)
        source = SOURCE.read_bytes()
    except OSError:
        return None
    stamp = (f"{os.path.realpath(compiler)}\0{info.st_size}\0{info.st_mtime_ns}\0"
             f"{_HOW}\0").encode()
    return Path(folder) / f"client-{hashlib.sha256(stamp + source).hexdigest()[:24]}"


def _compile(compiler: str) -> bytes | None:
    """Linked statically where the C library allows it: a static program starts without
    the dynamic loader, ~0.13 ms of every action (25 runs, this 2-core machine); else
    dynamically."""
    for link in (["-static"], []):
        binary = _compile_with(compiler, link)
        if binary is not None:
            return binary
    return None


def _compile_with(compiler: str, link: list[str]) -> bytes | None:
    with tempfile.TemporaryDirectory(prefix="buildgen-client-") as scratch:
        program = os.path.join(scratch, "client")
        try:
            done = subprocess.run([compiler, "-O2", "-std=gnu11", *link, "-o", program,
                                   str(SOURCE)],
                                  capture_output=True, check=False, timeout=120)
            if done.returncode != 0:
                return None
            with open(program, "rb") as f:
                return f.read()
        except (OSError, subprocess.SubprocessError):
            return None
