"""cudnn modules (for the composite GPU target) compile with nvcc and the flags a build uses,
without warnings, and export what buildgen_abi.h names: the examples' and the small cases'
whose calls the examples lack (cudnnAddTensor, softmax, average pools, a residual as z)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cpulib_build import imported, one_region
from cpulib_cases import conv_block, norms, pools, resblock
from cudnn_cases import one_d
from gpulib import compile_module, defined_symbols, example

from buildgen.backends.cudnn import CudnnBackend
from buildgen.backends.gpu_libraries import CUDNN, wheel_dirs
from buildgen.errors import BuildgenError

pytestmark = pytest.mark.slow  # nvcc: ~4 s a module on 2 cores

CASES = {
    "conv_block": (conv_block, {"x": (1, 8, 12, 12)}, None),
    "pools": (pools, {"x": (1, 8, 15, 15)}, ["/mp", "/ap", "/c", "/y"]),
    "norms": (norms, {"x": (2, 6, 10)}, ["/sm", "/y"]),
    "resblock": (resblock, {"x": (1, 8, 10, 10)}, None),
    "one_d": (one_d, {}, ["/c", "/r", "/y"]),
}


@pytest.fixture(scope="module", autouse=True)
def _cudnn_installed() -> None:
    try:
        wheel_dirs(CUDNN)
    except BuildgenError:
        pytest.skip(f"cuDNN is not installed: {CUDNN.pip}")


def _check(model: str, text: str, region_ids: list[str], folder: Path) -> None:
    symbols = defined_symbols(compile_module(text, "cudnn", folder, model))
    expected = {f"{model}__cudnn_{s}" for s in ("create", "destroy", "scratch_bytes")}
    expected |= {f"{model}__cudnn_{r}" for r in region_ids}
    assert expected <= symbols


@pytest.mark.parametrize("model", ["cnn", "encoder", "mlp"])
def test_example_module_compiles(model: str, tmp_path: Path) -> None:
    graph, weights, partition = example(model)
    text = CudnnBackend().generate(model, graph, partition, {}, weights).text
    _check(model, text, [r.id for r in partition.regions_for("cudnn")], tmp_path)


@pytest.mark.parametrize("case", sorted(CASES))
def test_case_module_compiles(case: str, tmp_path: Path) -> None:
    make, inputs, nodes = CASES[case]
    graph, weights = imported(make(), inputs, tmp_path)
    partition = one_region(graph, "cudnn", nodes)
    options = {"allow_tf32": True, "algorithm_search": "benchmark"}
    text = CudnnBackend().generate(case, graph, partition, options, weights).text
    _check(case, text, [r.id for r in partition.regions_for("cudnn")], tmp_path)
