"""Every example model built for the composite target {host: c, device: cuda sm_90,
accelerators: [cudnn, cublas]} through `buildgen build`: the regions go to cuDNN and cuBLAS,
the nvcc objects link into a library that loads without a GPU, and on a GPU the outputs match
onnxruntime on the CPU (that part skips, saying why, where there is no GPU)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
from cpulib_build import (
    assert_matches_onnxruntime,
    build_cases,
    build_examples,
    example_models,
    explain,
    library,
    ops_on,
    run_build,
    write_manifest,
)
from cpulib_cases import COMMON, ONEDNN_ONLY
from gpulib import GPU_TARGET, no_gpu_reason

from buildgen.backends.gpu_libraries import CUBLAS, CUDNN, wheel_dirs
from buildgen.errors import BuildgenError

pytestmark = pytest.mark.slow
MODELS = example_models()


def _libraries_installed() -> None:
    for wheel in (CUBLAS, CUDNN):
        try:
            wheel_dirs(wheel)
        except BuildgenError:
            pytest.skip(f"{wheel.what} is not installed: {wheel.pip}")


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _libraries_installed()
    return build_examples(tmp_path_factory.mktemp("gpu-examples"), GPU_TARGET)


def test_regions_go_to_the_libraries(build_dir: Path) -> None:
    assert {"Gemm", "Relu", "Erf"} <= ops_on(build_dir, "mlp", "cublas")
    assert ops_on(build_dir, "mlp", "cudnn") == set()
    assert {"Conv", "BatchNormalization", "Relu", "Add", "MaxPool", "GlobalAveragePool"} <= \
        ops_on(build_dir, "cnn", "cudnn")
    assert ops_on(build_dir, "cnn", "cublas") == {"Gemm"}
    assert {"MatMul", "Add", "Div", "Erf"} <= ops_on(build_dir, "encoder", "cublas")
    assert ops_on(build_dir, "encoder", "cudnn") == {"Softmax"}


def test_explain_names_the_libraries(build_dir: Path) -> None:
    text = explain(build_dir.parent, "encoder")
    assert "cublas (accelerator)" in text and "cudnn (accelerator)" in text
    assert "pattern: cublas.matmul,cublas.gelu" in text and "pattern: cudnn.softmax" in text
    assert "copied in: 'x' cpu -> cuda" in text  # the GPU regions share device tensors


@pytest.mark.parametrize("model", sorted(MODELS))
def test_library_links_and_loads_without_a_gpu(build_dir: Path, model: str) -> None:
    lib = ctypes.CDLL(str(library(build_dir, model)))
    for name in ("create", "run", "destroy"):
        assert hasattr(lib, f"{model}_{name}")
    sources = build_dir / model / "lib" / "src"
    assert (sources / "cublas.cu").is_file() and (sources / "cudnn.cu").is_file()


@pytest.mark.parametrize("model", sorted(MODELS))
def test_example_matches_onnxruntime_on_a_gpu(build_dir: Path, model: str) -> None:
    reason = no_gpu_reason()
    if reason is not None:
        pytest.skip(f"needs a GPU: {reason}")
    assert_matches_onnxruntime(library(build_dir, model), MODELS[model][0], seed=len(model))


def test_small_cases_match_onnxruntime_on_a_gpu(tmp_path: Path) -> None:
    """The CPU-library cases (biases, batched and transposed GEMMs, folded BatchNorms,
    residuals, pools, softmaxes) on the GPU target; built only where a GPU runs them."""
    reason = no_gpu_reason()
    if reason is not None:
        pytest.skip(f"needs a GPU: {reason}")
    _libraries_installed()
    # depthwise_3d's 3-D convolution runs on no backend of this target (nor on the c host).
    cases = tuple(c for c in (*COMMON, *ONEDNN_ONLY) if c.name != "depthwise_3d")
    build_cases(tmp_path, cases, GPU_TARGET)
    for case in cases:
        assert_matches_onnxruntime(library(tmp_path / "build", case.name),
                                   tmp_path / f"{case.name}.onnx")


def test_a_cublas_attribute_rebuilds_only_the_cublas_modules(build_dir: Path) -> None:
    """allow_tf32 and workspace_mb affect codegen: a change re-runs each model's cublas
    codegen, its nvcc compile and the link, and nothing of cudnn, cuda or the partition."""
    target = {**GPU_TARGET, "accelerators": [
        {"kind": "cudnn"}, {"kind": "cublas", "allow_tf32": True, "workspace_mb": 16}]}
    folder = build_dir.parent
    done = run_build(write_manifest(folder, MODELS, target), build_dir)
    ran = [line.split("] ", 1)[1] for line in done.stdout.splitlines() if line.startswith("[")]
    for model in MODELS:
        assert f"CODEGEN cublas {model}/lib" in ran, ran
        assert f"NVCC {model}/lib cublas.o" in ran, ran
    others = [a for a in ran if "cudnn" in a or "cuda.o" in a or a.startswith("PARTITION")]
    assert not others, ran
