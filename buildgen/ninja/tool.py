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
    """Colour as buildgen.term decides for where the output goes: the terminal, or (when
    captured, to be shown only on failure) stderr."""
    import sys

    from buildgen.term import ninja_environ

    return subprocess.run(
        [ninja_binary(), "-C", str(build_dir), *args],
        capture_output=capture,
        text=True,
        check=False,
        env=ninja_environ(sys.stderr if capture else sys.stdout),
    )


def exit_status(returncode: int) -> int:
    """ninja's exit status in buildgen's terms (docs/cli.md): 0 built, 130 interrupted (ninja
    ≥ 1.12 says 130, older ninja 2, a signal shows as a negative code), 1 anything else."""
    if returncode < 0:
        return 128 - returncode
    if returncode in (0, 130):
        return returncode
    return 130 if returncode == 2 else 1
