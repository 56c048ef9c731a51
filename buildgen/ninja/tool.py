"""Find and run the ninja binary (from the `ninja` PyPI package, else PATH)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from buildgen.errors import BuildgenError, Diagnostic


def ninja_binary() -> str:
    try:
        import ninja  # the PyPI package ships the binary next to the interpreter's scripts

        candidate = os.path.join(ninja.BIN_DIR, "ninja")
        if os.path.isfile(candidate):
            return candidate
    except ImportError:
        pass
    found = shutil.which("ninja")
    if found is None:
        raise BuildgenError(Diagnostic("ninja not found", hint="pip install ninja"))
    return found


def run_ninja(
    build_dir: Path, args: Sequence[str], capture: bool = False
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ninja_binary(), "-C", str(build_dir), *args],
        capture_output=capture,
        text=True,
        check=False,
    )
