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
    tries = runs.read_text().count("run")  # 1: linked statically; 2: no static C library
    assert tries in (1, 2)
    (kept,) = workers.glob("client-*")
    assert os.access(kept, os.X_OK)
    assert workers.stat().st_mode & 0o077 == 0  # only this user can reach it
    # Another compiler (here: the same script, edited) is another client.
    cc.write_text(cc.read_text() + "\n")
    os.utime(cc, ns=(1, 1))
    assert compiled_client() is not None
    assert runs.read_text().count("run") == 2 * tries
    assert len(list(workers.glob("client-*"))) == 2


def test_a_failing_compiler_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDGEN_WORKER_DIR", str(tmp_path / "workers"))
    monkeypatch.setenv("CC", "/bin/false")
    assert compiled_client() is None
    assert not list((tmp_path / "workers").glob("client-*"))


def test_the_client_is_linked_statically_where_the_c_library_allows(tmp_path, monkeypatch):
    """No dynamic loader on every action's start (~0.13 ms); a C library without a static
    archive still gets a client, linked dynamically."""
    import subprocess

    monkeypatch.setenv("BUILDGEN_WORKER_DIR", str(tmp_path / "workers"))
    program = tmp_path / "probe"
    probe = subprocess.run(["cc", "-static", "-x", "c", "-", "-o", str(program)],
                           input="int main(void){return 0;}", text=True, capture_output=True)
    client = compiled_client()
    assert client is not None
    assert _has_interpreter(client) == (probe.returncode != 0)


def _has_interpreter(elf: bytes) -> bool:
    """Whether a 64-bit little-endian ELF names a dynamic loader (a PT_INTERP header)."""
    import struct

    phoff, = struct.unpack_from("<Q", elf, 0x20)
    size, count = struct.unpack_from("<HH", elf, 0x36)
    return any(struct.unpack_from("<I", elf, phoff + i * size)[0] == 3 for i in range(count))
