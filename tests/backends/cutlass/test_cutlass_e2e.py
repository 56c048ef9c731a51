"""`buildgen build` of the committed examples/cuda/BUILD.yaml: every example model for
{host: c, device: {kind: cuda, arch: sm_90}, accelerators: [cutlass, cudnn, cublas]}. Real
nvcc compiles every module and the shared CUTLASS shards (GEMMs and convolutions, one shared
by two models); the libraries link and load; without a GPU create() fails cleanly, on one the
outputs are within 1e-3 (relative) of onnxruntime's. One build serves every test.
"""

from __future__ import annotations

import ctypes
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cutlass_cases import EXAMPLES, INPUTS, ROOT, no_gpu_reason

from buildgen import runtime

MODELS = ("cnn", "encoder", "mlp")
MANIFEST = ROOT / "examples" / "cuda" / "BUILD.yaml"
TARGET = "h100"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from buildgen.ninja.gen import generate

    build = tmp_path_factory.mktemp("cuda-examples") / "build"
    generate(MANIFEST, build)
    done = subprocess.run(["ninja", "-C", str(build)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    return build


def _library(built: Path, name: str) -> Path:
    return built / name / TARGET / f"lib{name}.so"


@pytest.mark.slow
def test_regions_go_where_the_priority_order_says(built: Path) -> None:
    def backends(name: str) -> set[str]:
        partition = json.loads((built / name / TARGET / "partition.json").read_text())
        return {region["target"] for region in partition["regions"]}

    # CUTLASS (first) takes every GEMM and convolution; cuDNN the pools; the cuda device
    # the encoder's softmax, layer norms and head transposes. Nothing falls back to the host.
    assert backends("mlp") == {"cutlass"}
    assert backends("cnn") == {"cutlass", "cudnn", "cuda"}
    assert backends("encoder") == {"cutlass", "cudnn", "cuda"}


@pytest.mark.slow
def test_each_instantiation_is_compiled_once(built: Path) -> None:
    (folder,) = (built / "_shared").glob("cutlass-*")  # beside the c host's kernels
    index = (folder / "index.md").read_text()
    # Kernels come from examples/cuda/h100.records.json (tuned per shape), so the models'
    # kernels differ; a kernel serving several calls (the encoder's q/k/v/out GEMMs, the
    # cnn's 32-channel convolutions) is one instantiation, compiled once. Two models sharing
    # one is test_cutlass_incremental's.
    parts = index.split("\n## ")[1:]
    names = [part.split(" ", 1)[0] for part in parts]
    assert len(names) == len(set(names)) and "conv2d" in index
    assert any(part.count("\n- ") >= 3 for part in parts)
    assert sorted(p.name for p in folder.glob("shard_*.o")) == [f"shard_{i}.o" for i in range(4)]


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_libraries_link_the_shared_kernels_and_load(built: Path, name: str) -> None:
    library = _library(built, name)
    ctypes.CDLL(str(library))  # every symbol resolves: the archive's launchers are in
    symbols = subprocess.run(["nm", str(library)], capture_output=True, text=True,
                             check=True).stdout
    launchers = [line for line in symbols.splitlines() if " bg_cutlass_" in line]
    assert launchers and all(" t " in line or " T " in line for line in launchers)
    regions = (built / name / TARGET / "src" / "cutlass.cu").read_text()
    assert f"{name}__cutlass_r" in regions


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_create_without_a_gpu_fails_cleanly(built: Path, name: str) -> None:
    reason = no_gpu_reason()
    if reason is None:
        pytest.skip("a CUDA GPU is here: test_outputs_match_onnxruntime runs the library")
    library = _library(built, name)
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
    compiled = CompiledModel(_library(built, name), name)
    try:
        got = compiled.run(feeds)
    finally:
        compiled.close()
    for want, (out, have) in zip(expected, got.items(), strict=True):
        scale = max(float(np.abs(want).max()), 1e-6)
        assert float(np.abs(have - want).max()) / scale < 1e-3, out
