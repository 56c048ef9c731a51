"""The package is lint-clean (ruff) and type-checks (mypy): part of the test command."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True)


@pytest.mark.skipif(
    shutil.which("ruff") is None, reason="ruff is not installed (pip install .[test])"
)
def test_ruff():
    result = _run("ruff", "check", "buildgen", "tests", "bench", "examples", "docs")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy():
    pytest.importorskip("mypy")
    result = _run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr
