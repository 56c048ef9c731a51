"""Every example (and one with host <-> device copies in the middle) built for
{host: c, device: {kind: cuda, arch: sm_90}} by `buildgen build`: nvcc compiles the cuda
module, the host links it, the library loads, and without a GPU create() fails with the
CUDA call named instead of crashing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cuda_helpers import MIXED, TARGET_NAME, cuda_device_problem, example_models, run_buildgen

from buildgen import runtime

pytestmark = pytest.mark.slow
MODELS = sorted([*example_models(), MIXED[0]])


def _lib(build_dir: Path, model: str) -> Path:
    return build_dir / model / TARGET_NAME / f"lib{model}.so"


@pytest.mark.parametrize("model", MODELS)
def test_the_library_links_cudart_and_loads(cuda_examples: Path, model: str) -> None:
    lib = _lib(cuda_examples, model)
    needed = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
    assert "libcudart.so" in needed and ("RUNPATH" in needed or "RPATH" in needed)
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                             text=True).stdout
    assert f"{model}_create" in symbols and f"{model}_device_arena_bytes" in symbols
    assert f"{model}__cuda_r0" not in symbols  # module symbols stay inside the library
    problem = cuda_device_problem()
    if problem is None:
        runtime.load(lib).close()
        return
    with pytest.raises(runtime.ModelError, match=rf"{model}_create failed: cudaGetDeviceCount"):
        runtime.load(lib)


def test_the_report_states_device_memory_and_copies(cuda_examples: Path) -> None:
    name = MIXED[0]
    report = json.loads((cuda_examples / name / TARGET_NAME / "report.json").read_text())
    assert report["device_arena_bytes"] > 0
    assert [(t["tensor"], t["to"]) for t in report["transfers"]] == [
        ("x", "cuda"), ("/Relu_output_0", "cpu"), ("/fc2/Gemm_output_0", "cuda"), ("y", "cpu")]
    text = (cuda_examples / name / TARGET_NAME / "report.md").read_text()
    assert "device arena per instance" in text


def test_explain_shows_the_device_regions_and_copies(cuda_examples: Path) -> None:
    folder = cuda_examples.parent
    done = run_buildgen("explain", MIXED[0], "--manifest", str(folder / "BUILD.yaml"),
                        "--build-dir", str(cuda_examples), cwd=folder)
    assert done.returncode == 0, done.stderr
    assert "r0  cuda (device)" in done.stdout and "r1  c (host)" in done.stdout
    assert "copied in: '/Relu_output_0' cuda -> cpu, 32768 bytes" in done.stdout
    assert "copied out: 'y' cuda -> cpu, 320 bytes" in done.stdout


def test_a_second_build_compiles_nothing(cuda_examples: Path) -> None:
    folder = cuda_examples.parent
    done = run_buildgen("build", "--manifest", str(folder / "BUILD.yaml"), "--build-dir",
                        str(cuda_examples), cwd=folder)
    assert done.returncode == 0, done.stderr
    assert "NVCC" not in done.stdout and "LINK" not in done.stdout
