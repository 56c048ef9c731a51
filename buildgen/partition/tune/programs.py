"""How `buildgen tune --backend` runs the profiler programs it builds: here, or on a worker
with the target's GPU (buildgen.remote.programs). Either way, one call per program."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProgramRun:
    exit_code: int
    stdout: str
    stderr: str


ProgramRunner = Callable[[Path], ProgramRun]


def run_here(program: Path) -> ProgramRun:
    done = subprocess.run([str(program)], capture_output=True, text=True, check=False)
    return ProgramRun(done.returncode, done.stdout, done.stderr)
