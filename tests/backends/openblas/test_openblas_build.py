"""Small models built with a c + openblas target (manifest -> `buildgen build`) agree with
onnxruntime, and their GEMM-shaped ops really ran on OpenBLAS. Two cases build in the quick
suite; the rest are slow."""

from __future__ import annotations

from pathlib import Path

import pytest
from cpulib_build import build_cases, check_case, composite, source
from cpulib_cases import COMMON, QUICK, Case

pytest.importorskip("onnxruntime")
pytest.importorskip("scipy_openblas32", reason="pip install scipy-openblas32")
TARGET = composite("openblas", threads=1)
QUICK_CASES = [c for c in COMMON if c.name in QUICK]
SLOW_CASES = [c for c in COMMON if c.name not in QUICK]


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_cases(tmp_path_factory.mktemp("openblas-quick"), QUICK_CASES, TARGET)


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_cases(tmp_path_factory.mktemp("openblas-slow"), SLOW_CASES, TARGET)


@pytest.mark.parametrize("case", QUICK_CASES, ids=lambda c: c.name)
def test_quick_case_matches_onnxruntime(quick: Path, case: Case) -> None:
    check_case(quick, case, "openblas")


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW_CASES, ids=lambda c: c.name)
def test_case_matches_onnxruntime(slow: Path, case: Case) -> None:
    check_case(slow, case, "openblas")


def test_generated_source_is_readable(quick: Path) -> None:
    text = source(quick / "build", "conv_block", "openblas")
    assert "Conv '/c1'" in text and "BatchNormalization '/bn1'" in text  # ONNX origin
    assert "int conv_block__openblas_r0(bg_env *env" in text  # one function per region
    assert "scipy_cblas_sgemm(CblasRowMajor" in text and "bg_im2col(" in text
    assert "conv_block.onnx (graph 'conv_block'" in text and str(quick) not in text
