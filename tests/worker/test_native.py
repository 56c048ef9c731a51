"""The compiled worker client (buildgen/worker/native.py) is compiled once per machine."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from buildgen.worker.native import compiled_client


def _counting_compiler(folder: Path) -> tuple[Path, Path]:
    """A `cc` that counts its runs in a file next to it, then runs the real one."""
    real = shutil.which("cc")
    assert real, "no C compiler"
    log = folder / "runs"
    cc = folder / "cc"
    cc.write_text(f'#!/bin/sh\necho run >> "{log}"\nexec "{real}" "$@"\n')
    cc.chmod(0o755)
    return cc, log


def test_the_client_is_compiled_once_per_compiler_and_kept_privately(tmp_path, monkeypatch):
    workers = tmp_path / "workers"
    cc, runs = _counting_compiler(tmp_path)
    monkeypatch.setenv("BUILDGEN_WORKER_DIR", str(workers))
    monkeypatch.setenv("CC", str(cc))
    first = compiled_client()
    assert first is not None and first.startswith(b"\x7fELF")
    assert compiled_client() == first
    assert runs.read_text().count("run") == 1
    (kept,) = workers.glob("client-*")
    assert os.access(kept, os.X_OK)
    assert workers.stat().st_mode & 0o077 == 0  # only this user can reach it
    # Another compiler (here: the same script, edited) is another client.
    cc.write_text(cc.read_text() + "\n")
    os.utime(cc, ns=(1, 1))
    assert compiled_client() is not None
    assert runs.read_text().count("run") == 2
    assert len(list(workers.glob("client-*"))) == 2


def test_a_failing_compiler_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDGEN_WORKER_DIR", str(tmp_path / "workers"))
    monkeypatch.setenv("CC", "/bin/false")
    assert compiled_client() is None
    assert not list((tmp_path / "workers").glob("client-*"))
