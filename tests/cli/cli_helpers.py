"""Helpers for the command-line tests (a uniquely named module, so no conftest clash)."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_python(*args, cwd=None):
    """`python <args>` with this checkout importable, as build.ninja's actions run it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True
    )
