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


def small_project(root: Path) -> Path:
    """root/BUILD.yaml naming an empty model file (gen and `ninja -n` never read it), for
    two targets; returns the manifest."""
    (root / "models").mkdir(parents=True)
    (root / "models" / "m.onnx").write_bytes(b"")
    manifest = root / "BUILD.yaml"
    manifest.write_text(
        "buildgen: 1\n"
        "targets:\n  cpu: {kind: composite, host: {kind: c, opt_level: 2}}\n"
        "models:\n  m: {source: models/m.onnx, inputs: {x: [1, 4]}, targets: [cpu, c]}\n"
    )
    return manifest
