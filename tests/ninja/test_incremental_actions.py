"""Which actions a change re-runs, counted from the action journal (.buildgen/actions.jsonl):
only those whose output the change can alter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from small_project import write_project

from buildgen.cache.journal import journal_size, read_entries

REPO = Path(__file__).resolve().parents[2]


def _build(project: Path) -> list[str]:
    """Build; the outputs of the actions that ran (or were restored) this time."""
    build_dir = project / "build"
    offset = journal_size(build_dir) if build_dir.exists() else 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")}
    env.update(PYTHONPATH=str(REPO), BUILDGEN_CACHE_DIR=str(project.parent / "cache"))
    done = subprocess.run([sys.executable, "-m", "buildgen", "build"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return sorted(entry.output for entry in read_entries(build_dir, offset))


def test_opt_level_recompiles_code_and_never_reassembles_weights(tmp_path: Path) -> None:
    manifest = write_project(tmp_path / "p")
    first = _build(manifest.parent)
    assert "tiny/cpu/obj/weights.o" in first
    manifest.write_text(manifest.read_text().replace('"opt_level": 1', '"opt_level": 2'))
    again = _build(manifest.parent)
    assert "tiny/cpu/obj/model.o" in again and "tiny/cpu/libtiny.so" in again
    assert "tiny/cpu/obj/weights.o" not in again
    # Python stages read no compile flag: none of them runs again.
    assert not [out for out in again if out.endswith((".json", ".c", ".h", ".S"))], again
