"""Shared by the cuda tests: the examples, the target, building through `buildgen build`,
and whether this machine has a CUDA device to run on (CI has nvcc but no GPU)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
TARGET_NAME = "gpu"
TARGET = {"kind": "composite", "host": {"kind": "c"}, "device": {"kind": "cuda", "arch": "sm_90"}}
# The fixed-size model built with a pin that keeps a Gemm on the host: host <-> device copies
# in the middle of the run.
MIXED = ("mixed", "mlp", (("/fc2/Gemm", "host"),))


def example_models() -> dict[str, tuple[Path, dict[str, list[int]]]]:
    """The committed examples (root BUILD.yaml): name -> (ONNX file, input shapes)."""
    data = yaml.safe_load((REPO / "BUILD.yaml").read_text())
    return {name: (REPO / m["source"], m["inputs"]) for name, m in data["models"].items()}


def write_manifest(
    folder: Path,
    models: Mapping[str, tuple[Path, Mapping[str, Sequence[int]]]],
    target: Mapping[str, object] = TARGET,
    pins: Mapping[str, Sequence[tuple[str, str]]] | None = None,
) -> Path:
    entries: dict[str, object] = {}
    for name, (source, inputs) in sorted(models.items()):
        entry: dict[str, object] = {
            "source": str(source), "inputs": {k: list(v) for k, v in inputs.items()},
            "targets": [TARGET_NAME],
        }
        if pins and name in pins:
            entry["pin"] = dict(pins[name])
        entries[name] = entry
    manifest = folder / "BUILD.yaml"
    manifest.write_text(yaml.safe_dump(
        {"buildgen": 1, "targets": {TARGET_NAME: dict(target)}, "models": entries},
        sort_keys=True))
    return manifest


def run_buildgen(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "buildgen", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)


def build(folder: Path) -> Path:
    done = run_buildgen("build", "--manifest", str(folder / "BUILD.yaml"), "--build-dir",
                        str(folder / "build"), cwd=folder)
    if done.returncode != 0:
        output = f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        raise AssertionError(f"buildgen build failed:\n{output}")
    return folder / "build"


@cache
def cuda_device_problem() -> str | None:
    """Why this machine cannot run CUDA code (None when it can): a tiny probe of the runtime
    the builds link, cudaGetDeviceCount."""
    from buildgen.backends.cuda_toolchain import find_toolkit
    from buildgen.errors import BuildgenError

    try:
        toolkit = find_toolkit(None)
    except BuildgenError as exc:
        return f"no CUDA toolkit ({exc})"
    try:
        cudart = ctypes.CDLL(str(toolkit.lib / toolkit.cudart_name))
    except OSError as exc:
        return f"cannot load the CUDA runtime: {exc}"
    count = ctypes.c_int(0)
    status = cudart.cudaGetDeviceCount(ctypes.byref(count))
    if status != 0:
        cudart.cudaGetErrorString.restype = ctypes.c_char_p
        message = cudart.cudaGetErrorString(status).decode(errors="replace")
        return f"cudaGetDeviceCount failed: {message}"
    return None if count.value > 0 else "cudaGetDeviceCount found 0 devices"
