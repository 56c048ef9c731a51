"""`buildgen build` of the mlp and cnn examples for {host: c, device: {kind: cuda, arch:
sm_90}, accelerators: [cutlass]}: real nvcc compiles of the real shared kernel shards (GEMMs
and convolutions, one shared by both models), libraries that link the archive and load;
without a GPU create() fails cleanly, on one the outputs are within 1e-3 (relative) of
onnxruntime's.

One build serves every test (module fixture). The encoder is left out: its two GEMMs add
about a third to the shards' compile time and nothing this test does not already show;
test_cutlass_codegen covers its code.
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cutlass_cases import EXAMPLES, INPUTS, no_gpu_reason

from buildgen import runtime

MODELS = ("cnn", "mlp")

MANIFEST = """\
buildgen: 1
targets:
  gpu:
    kind: composite
    host: {kind: c}
    device: {kind: cuda, arch: sm_90, nvcc_jobs: 2}
    accelerators: [{kind: cutlass}]
models:
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from buildgen.ninja.gen import generate

    root = tmp_path_factory.mktemp("cutlass-e2e")
    lines = [MANIFEST]
    for name in MODELS:
        shapes = ", ".join(f"{k}: {v}" for k, v in INPUTS[name].items())
        lines.append(f"  {name}: {{source: {EXAMPLES / name}.onnx, inputs: {{{shapes}}}, "
                     "targets: [gpu]}\n")
    (root / "BUILD.yaml").write_text("".join(lines))
    build = root / "build"
    generate(root / "BUILD.yaml", build)
    done = subprocess.run(["ninja", "-C", str(build)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    return build


@pytest.mark.slow
def test_the_models_share_kernels(built: Path) -> None:
    (folder,) = (built / "_shared").iterdir()
    index = (folder / "index.md").read_text()
    # The final Gemm of both models has one instantiation: compiled once, used by both.
    shared = [part for part in index.split("\n## ")[1:]
              if "cnn/gpu region" in part and "mlp/gpu region" in part]
    assert shared and "conv2d" in index
    assert sorted(p.name for p in folder.glob("shard_*.o")) == [f"shard_{i}.o" for i in range(4)]


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_libraries_link_the_shared_kernels_and_load(built: Path, name: str) -> None:
    library = built / name / "gpu" / f"lib{name}.so"
    ctypes.CDLL(str(library))  # every symbol resolves: the archive's launchers are in
    symbols = subprocess.run(["nm", str(library)], capture_output=True, text=True,
                             check=True).stdout
    launchers = [line for line in symbols.splitlines() if " bg_cutlass_" in line]
    assert launchers and all(" t " in line or " T " in line for line in launchers)
    regions = (built / name / "gpu" / "src" / "cutlass.cu").read_text()
    assert f"{name}__cutlass_r" in regions


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_create_without_a_gpu_fails_cleanly(built: Path, name: str) -> None:
    reason = no_gpu_reason()
    if reason is None:
        pytest.skip("a CUDA GPU is here: test_outputs_match_onnxruntime runs the library")
    library = built / name / "gpu" / f"lib{name}.so"
    with pytest.raises(runtime.ModelError, match=rf"{name}_create failed: cuda[A-Za-z]+"):
        runtime.load(library)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_outputs_match_onnxruntime(built: Path, name: str) -> None:
    reason = no_gpu_reason()
    if reason is not None:
        pytest.skip(f"needs a CUDA GPU to run the library: {reason}")
    import onnxruntime as ort

    from buildgen.runtime import CompiledModel

    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal(v).astype(np.float32) for k, v in INPUTS[name].items()}
    session = ort.InferenceSession(str(EXAMPLES / f"{name}.onnx"),
                                   providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    compiled = CompiledModel(built / name / "gpu" / f"lib{name}.so", name)
    try:
        got = compiled.run(feeds)
    finally:
        compiled.close()
    for want, (out, have) in zip(expected, got.items(), strict=True):
        scale = max(float(np.abs(want).max()), 1e-6)
        assert float(np.abs(have - want).max()) / scale < 1e-3, out
