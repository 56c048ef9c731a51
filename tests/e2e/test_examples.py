"""Build the root BUILD.yaml (the committed examples) and check every library numerically.

Each example is compared with onnxruntime on random inputs, through buildgen.runtime and,
for the MLP, through a plain C program (examples/run_mlp.c) linked against libmlp.so the
way a user's application would link it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from buildgen import runtime

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "BUILD.yaml"
MODELS = yaml.safe_load(MANIFEST.read_text())["models"]
RTOL, ATOL = 1e-3, 1e-4


@pytest.fixture(scope="module")
def examples_build(tmp_path_factory: pytest.TempPathFactory, buildgen_build) -> Path:
    build_dir = tmp_path_factory.mktemp("examples-build")
    buildgen_build(MANIFEST, build_dir)
    return build_dir


def _library(build_dir: Path, model: str) -> Path:
    target = MODELS[model]["targets"][0]
    return build_dir / model / target / f"lib{model}.so"


def test_manifest_lists_the_committed_models() -> None:
    assert sorted(MODELS) == ["cnn", "encoder", "mlp"]
    for entry in MODELS.values():
        assert (REPO / entry["source"]).stat().st_size < 5 * 2**20


@pytest.mark.parametrize("model", sorted(MODELS))
def test_example_matches_onnxruntime(examples_build: Path, model: str, onnxruntime_outputs):
    compiled = runtime.load(_library(examples_build, model))
    expected_inputs = {name: tuple(shape) for name, shape in MODELS[model]["inputs"].items()}
    assert {i.name: i.shape for i in compiled.inputs} == expected_inputs

    rng = np.random.default_rng(sum(map(ord, model)))
    feeds = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in compiled.inputs}
    ours = compiled.run(feeds)
    theirs = onnxruntime_outputs(REPO / MODELS[model]["source"], feeds)
    assert len(ours) == len(theirs)
    for (name, value), reference in zip(ours.items(), theirs, strict=True):
        assert value.shape == reference.shape, name
        np.testing.assert_allclose(value, reference, rtol=RTOL, atol=ATOL, err_msg=name)

    # A second call reuses the instance's arena: it must not depend on leftovers.
    again = compiled.run(feeds)
    for name, value in ours.items():
        np.testing.assert_array_equal(again[name], value, err_msg=name)
    compiled.close()


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_run_mlp_c_program(examples_build: Path, tmp_path: Path, onnxruntime_outputs):
    lib_dir = _library(examples_build, "mlp").parent
    exe = tmp_path / "run_mlp"
    compile_cmd = [
        "cc", "-O2", "-std=c11", "-Wall", "-Werror", str(REPO / "examples" / "run_mlp.c"),
        f"-I{lib_dir / 'include'}", f"-L{lib_dir}", "-lmlp", f"-Wl,-rpath,{lib_dir}",
        "-o", str(exe),
    ]  # fmt: skip
    subprocess.run(compile_cmd, check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout

    # run_mlp.c fills its input with x[k] = ((k % 17) - 8) / 8.
    (name, shape), *_ = MODELS["mlp"]["inputs"].items()
    x = ((np.arange(np.prod(shape)) % 17 - 8) / 8).astype(np.float32).reshape(shape)
    (reference,) = onnxruntime_outputs(REPO / MODELS["mlp"]["source"], {name: x})

    lines = out.splitlines()
    out_name, count = lines[0].split()
    assert out_name == "y" and int(count) == reference.size
    printed = np.array([float(v) for v in lines[1].split()], dtype=np.float32)
    np.testing.assert_allclose(printed, reference.ravel(), rtol=RTOL, atol=ATOL)


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_bench_runs_on_the_build(examples_build: Path, repo_env: dict[str, str]):
    """bench/bench_ort.py (few runs) works on this build and checks its numbers first."""
    cmd = [sys.executable, str(REPO / "bench" / "bench_ort.py"), "--no-build"]
    cmd += ["--build-dir", str(examples_build), "--runs", "3", "--warmup", "1", "--markdown"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=repo_env).stdout
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert [row.split("|")[1].strip() for row in rows[1:]] == sorted(MODELS)
