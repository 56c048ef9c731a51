"""With the action cache off, ninja runs the link itself: a library the linker cut short
and still exited 0 for (GNU ld at a full disk) fails the link and is removed, as the cache
wrapper does (buildgen/cache/elf_check.py), so the next build links it again."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from small_project import write_project

from buildgen.cli import main

# `cc` on PATH for the build: the real one, then, when CUT names a file that exists, the
# shared library it linked cut to 1,000 bytes (and the file removed: one link only).
_FAKE_CC = """#!/bin/sh
"{real}" "$@" || exit $?
case " $* " in *" -shared "*) ;; *) exit 0 ;; esac
[ -f "{cut}" ] || exit 0
rm -f "{cut}"
out=""; prev=""
for word in "$@"; do [ "$prev" = "-o" ] && out="$word"; prev="$word"; done
head -c 1000 "$out" > "$out.cut" && mv "$out.cut" "$out"
"""


@pytest.fixture
def cutting_cc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    real = shutil.which("cc")
    if real is None:
        pytest.skip("no C compiler")
    cut = tmp_path / "cut-next-link"
    fake = tmp_path / "bin" / "cc"
    fake.parent.mkdir()
    fake.write_text(_FAKE_CC.format(real=real, cut=cut))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("BUILDGEN_CACHE", "off")
    monkeypatch.setenv("BUILDGEN_WORKERS", "off")
    return cut


def test_a_library_cut_short_fails_its_link_and_the_next_build_links_it_again(
    tmp_path: Path, cutting_cc: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    manifest = write_project(tmp_path / "project")
    build = tmp_path / "project" / "build"
    library = build / "tiny" / "cpu" / "libtiny.so"
    args = ["build", "--manifest", str(manifest), "--build-dir", str(build)]
    cutting_cc.write_text("")
    assert main(args) == 1
    out, err = capfd.readouterr()
    assert "the linker exited 0 but wrote tiny/cpu/libtiny.so incomplete (1000 bytes" in out + err
    assert not library.exists()
    assert not cutting_cc.exists()  # the fake cut the one link it was asked to
    assert main(args) == 0
    assert library.stat().st_size > 1000
    assert main(args) == 0
    assert "no work to do" in "".join(capfd.readouterr())


def test_the_check_passes_whole_files_and_takes_no_buildgen_imports_beyond_its_own(
    tmp_path: Path,
) -> None:
    import subprocess

    whole = Path(sys.executable).resolve()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "buildgen.cache.elf_check", str(whole)],
        capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert {m for m in imported if m.startswith("buildgen")} <= {"buildgen", "buildgen.cache"}
