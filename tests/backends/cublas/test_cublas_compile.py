"""Each example's cublas module (for the composite GPU target) compiles with nvcc and the
flags a build uses, without warnings, and exports what buildgen_abi.h names."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpulib import compile_module, defined_symbols, example

from buildgen.backends.cublas import CublasBackend
from buildgen.backends.gpu_libraries import CUBLAS, wheel_dirs
from buildgen.errors import BuildgenError

pytestmark = pytest.mark.slow  # nvcc: ~3 s a module on 2 cores


@pytest.fixture(scope="module", autouse=True)
def _cublas_installed() -> None:
    try:
        wheel_dirs(CUBLAS)
    except BuildgenError:
        pytest.skip(f"cuBLAS is not installed: {CUBLAS.pip}")


@pytest.mark.parametrize("model", ["mlp", "encoder", "cnn"])
def test_module_compiles_and_exports_the_abi(model: str, tmp_path: Path) -> None:
    graph, weights, partition = example(model)
    source = CublasBackend().generate(model, graph, partition, {"allow_tf32": True}, weights)
    symbols = defined_symbols(compile_module(source.text, "cublas", tmp_path, model))
    regions = {f"{model}__cublas_{r.id}" for r in partition.regions_for("cublas")}
    expected = {f"{model}__cublas_{s}" for s in ("create", "destroy", "scratch_bytes")}
    assert regions and regions | expected <= symbols


@pytest.mark.parametrize("case", ["gemm_variants", "gelu_mlp", "mm_batched"])
def test_case_module_compiles(case: str, tmp_path: Path) -> None:
    """Calls the examples lack: transposed and scaled Gemms with C in the epilogue kernel,
    a GELU whose input is a graph output, a step whose GEMM ran elsewhere."""
    import cpulib_cases
    from cpulib_build import imported, one_region

    spec = next(c for c in (*cpulib_cases.COMMON, *cpulib_cases.ONEDNN_ONLY) if c.name == case)
    graph, weights = imported(spec.make(), spec.inputs, tmp_path)
    backend = CublasBackend()
    nodes = [n.name for n in graph.nodes if backend.decline_reason(n, graph) is None]
    partition = one_region(graph, "cublas", nodes)
    text = backend.generate(case, graph, partition, {"workspace_mb": 0}, weights).text
    symbols = defined_symbols(compile_module(text, "cublas", tmp_path, case))
    assert {f"{case}__cublas_{r.id}" for r in partition.regions_for("cublas")} <= symbols
