"""Run actions through the cache wrapper the way build.ninja does, in a tmp build dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def wrapper_env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")}
    env["BUILDGEN_PREBUILT"] = "off"  # as tests/conftest.py says
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["BUILDGEN_CACHE_DIR"] = str(cache)
    env.update(extra)
    return env


def run_action(
    build: Path,
    cache: Path,
    command: Sequence[str],
    *,
    rule: str = "cc",
    outputs: Sequence[str],
    inputs: Sequence[str],
    depfile: str | None = None,
    restat: bool = False,
    root: str = "..",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`python -m buildgen.cache exec ... -- command` in `build`, as ninja would run it."""
    argv = [sys.executable, "-m", "buildgen.cache", "exec", "--root", root, "--rule", rule]
    if restat:
        argv.append("--restat")
    if depfile:
        argv += ["--depfile", depfile]
    argv += ["--out", *outputs, "--in", *inputs, "--", *command]
    return subprocess.run(
        argv,
        cwd=build,
        env=env or wrapper_env(cache),
        capture_output=True,
        text=True,
        check=False,
    )


def outcomes(build: Path) -> list[str]:
    """The outcome of every action the wrapper ran in `build`, in order."""
    path = build / ".buildgen" / "actions.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["outcome"] for line in path.read_text().splitlines()]


def write_project(root: Path, header: str = "#define N 3\n") -> Path:
    """A tiny C project: src/a.c includes include/h.h; returns its build dir."""
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "include").mkdir(exist_ok=True)
    (root / "src" / "a.c").write_text('#include "h.h"\nint f(void) { return N; }\n')
    (root / "include" / "h.h").write_text(header)
    build = root / "build"
    build.mkdir(exist_ok=True)
    return build


def compile_a(build: Path, cache: Path, include: str = "-I../include", **kw: object):
    """Compile ../src/a.c to a.o through the wrapper (gcc depfile, like the cc rule)."""
    flags = ["-O1", *include.split(), "-MD", "-MF", "a.o.d"]
    command = ["gcc", *flags, "-c", "../src/a.c", "-o", "a.o"]
    return run_action(
        build,
        cache,
        command,
        outputs=["a.o"],
        inputs=["../src/a.c"],
        depfile="a.o.d",
        **kw,  # type: ignore[arg-type]
    )
