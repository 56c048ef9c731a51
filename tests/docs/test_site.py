"""The documentation site: it builds strictly, and its commands run.

Fences say what a block is: ```console blocks are commands a reader types (`$ ` lines,
`\\` continuing a line), each followed by the output it prints, and this test runs them from
a scratch copy of the repository and compares; ```sh blocks are illustrative (slow, need a
GPU, install things) and are not run. Other shell fence names are refused, so no block is
left in between.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    text: str
    expected: tuple[str, ...]  # the output shown under it; "..." lines match any lines


def console_commands(page: Path) -> list[Command]:
    source = page.read_text()
    commands: list[Command] = []
    for fence in FENCE.finditer(source):
        if fence.group(1) != "console":
            continue
        first_line = source.count("\n", 0, fence.start(2)) + 1
        commands += _commands(page.relative_to(ROOT).as_posix(), first_line, fence.group(2))
    return commands


def _commands(page: str, first_line: int, block: str) -> list[Command]:
    commands: list[Command] = []
    text, start, output = "", 0, []
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            if text:
                commands.append(Command(page, start, text, tuple(output)))
            start, output = first_line + i, []
            text = line[2:]
            while text.endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text[:-1] + " " + lines[i].strip()
        else:
            assert text, f"{page}:{first_line + i}: output before any `$ ` command"
            output.append(line)
        i += 1
    if text:
        commands.append(Command(page, start, text, tuple(output)))
    return commands


def matches(expected: tuple[str, ...], actual: list[str]) -> bool:
    """Line by line, where a line `...` stands for any number of lines."""
    if not expected:
        return True
    head, *rest = expected
    if head == "...":
        return any(matches(tuple(rest), actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and actual[0].rstrip() == head.rstrip() and matches(
        tuple(rest), actual[1:]
    )


ALL_COMMANDS = [c for page in PAGES for c in console_commands(page)]


def test_shell_blocks_say_whether_they_run():
    wrong = [
        f"{page.relative_to(ROOT)}: ```{m.group(1)}"
        for page in PAGES
        for m in FENCE.finditer(page.read_text())
        if m.group(1) in {"bash", "shell", "shell-session", "zsh"}
    ]
    assert not wrong, "use ```console (run by this test) or ```sh (illustrative): " + str(wrong)


def test_there_are_commands_to_run():
    assert len(ALL_COMMANDS) >= 5


@pytest.fixture(scope="module")
def scratch_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's tracked files (no build outputs), where the commands run."""
    copy = tmp_path_factory.mktemp("docs-repo")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True,
    )
    if listed.returncode == 0:
        for name in filter(None, listed.stdout.split("\0")):
            source = ROOT / name
            if source.is_file():
                (copy / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, copy / name)
    else:  # not a git checkout: everything but build outputs
        shutil.copytree(ROOT, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
            ".git", "build", "build-*", "site", "__pycache__", ".pytest_cache"))
    return copy


@pytest.mark.parametrize(
    "command", ALL_COMMANDS, ids=[f"{c.page}:{c.line}" for c in ALL_COMMANDS]
)
def test_console_command_runs(command: Command, scratch_repo: Path):
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command.text], cwd=scratch_repo,
        capture_output=True, text=True, timeout=300, env=_environment(),
    )
    where = f"{command.page}:{command.line}: $ {command.text}"
    assert result.returncode == 0, f"{where}\nexit {result.returncode}\n{result.stderr}"
    actual = result.stdout.splitlines()
    assert matches(command.expected, actual), (
        f"{where}\nexpected:\n" + "\n".join(command.expected) + "\ngot:\n" + result.stdout
    )


def _environment() -> dict[str, str]:
    """A reader's shell: this interpreter's `buildgen` first on PATH, no colour, and the
    suite's private action cache."""
    keep = ("HOME", "BUILDGEN_CACHE_DIR", "LANG", "TMPDIR", "PYTHONPATH")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {k: os.environ[k] for k in keep if k in os.environ} | {"NO_COLOR": "1", "PATH": path}


def test_the_site_builds_strictly(tmp_path: Path):
    """Broken links, anchors, pages left out of the nav and generator warnings all fail."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    site = tmp_path / "site"
    for page in ("reference/targets/index.html", "reference/cli/index.html",
                 "reference/manifest/index.html", "troubleshooting/index.html"):
        assert (site / page).is_file(), page
    targets = (site / "reference/targets/index.html").read_text()
    for kind in ("c", "onednn", "openblas", "cuda", "cublas", "cudnn", "cutlass"):
        assert f"<code>{kind}</code>" in targets, kind
