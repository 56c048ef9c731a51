"""An ELF output cut short (a full disk the linker did not report) fails its action and is
removed (buildgen/cache/elf_check.py, buildgen/cache/command.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from buildgen.cache.action import ActionSpec
from buildgen.cache.command import run_command
from buildgen.cache.elf_check import incomplete_elf


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real shared library and object, as cc writes them."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    folder = tmp_path_factory.mktemp("elf")
    (folder / "f.c").write_text("int f(int x) { return 2 * x + 1; }\n")
    subprocess.run(["cc", "-c", "-fPIC", "f.c", "-o", "f.o"], cwd=folder, check=True)
    subprocess.run(["cc", "-shared", "f.o", "-o", "libf.so"], cwd=folder, check=True)
    return folder


def _cut(source: Path, target: Path, size: int) -> Path:
    target.write_bytes(source.read_bytes()[:size])
    return target


def test_whole_files_pass_and_files_cut_anywhere_do_not(library: Path, tmp_path: Path) -> None:
    for name in ("libf.so", "f.o"):
        whole = library / name
        assert incomplete_elf(str(whole)) is None
        size = whole.stat().st_size
        # a page short (what ld left), the last byte, and inside the ELF header itself
        for keep in (size - 216, size - 1, 40):
            cut = _cut(whole, tmp_path / f"cut-{keep}-{name}", keep)
            problem = incomplete_elf(str(cut))
            assert problem is not None and problem.startswith(f"{keep} bytes"), (name, keep)


def test_other_files_are_not_judged(tmp_path: Path) -> None:
    (tmp_path / "text").write_text("not an ELF file\n")
    (tmp_path / "archive.a").write_bytes(b"!<arch>\n")
    (tmp_path / "empty").write_bytes(b"")
    for name in ("text", "archive.a", "empty", "missing"):
        assert incomplete_elf(str(tmp_path / name)) is None


def test_a_tool_that_exits_0_with_a_cut_library_fails_and_leaves_nothing(
    library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    short = _cut(library / "libf.so", tmp_path / "short.so", 1000)
    spec = ActionSpec(rule="link_shared", root=".", outputs=("libm.so",), inputs=(),
                      command=("cp", str(short), "libm.so"))
    assert run_command(spec).code == 1
    assert not (tmp_path / "libm.so").exists()
    assert "wrote libm.so incomplete (1000 bytes" in capsys.readouterr().err
    whole = ActionSpec(rule="link_shared", root=".", outputs=("libm.so",), inputs=(),
                       command=("cp", str(library / "libf.so"), "libm.so"))
    assert run_command(whole).code == 0
    assert (tmp_path / "libm.so").read_bytes() == (library / "libf.so").read_bytes()
