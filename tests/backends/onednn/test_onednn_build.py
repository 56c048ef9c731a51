"""Small models built with a c + onednn target (manifest -> `buildgen build`) agree with
onnxruntime, and their ops really ran on oneDNN. Two cases build in the quick suite; the
rest are slow."""

from __future__ import annotations

from pathlib import Path

import pytest
from cpulib_build import build_cases, check_case, composite, source
from cpulib_cases import COMMON, ONEDNN_ONLY, QUICK, Case

from buildgen.backends.libraries import ONEDNN_PIP, pip_onednn_prefix
from buildgen.errors import BuildgenError

pytest.importorskip("onnxruntime")
TARGET = composite("onednn", threads=1)
CASES = (*COMMON, *ONEDNN_ONLY)
QUICK_CASES = [c for c in CASES if c.name in QUICK]
SLOW_CASES = [c for c in CASES if c.name not in QUICK]


def _need_onednn() -> None:
    try:
        pip_onednn_prefix()
    except BuildgenError:
        pytest.skip(f"oneDNN is not installed: {ONEDNN_PIP}")


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _need_onednn()
    return build_cases(tmp_path_factory.mktemp("onednn-quick"), QUICK_CASES, TARGET)


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _need_onednn()
    return build_cases(tmp_path_factory.mktemp("onednn-slow"), SLOW_CASES, TARGET)


@pytest.mark.parametrize("case", QUICK_CASES, ids=lambda c: c.name)
def test_quick_case_matches_onnxruntime(quick: Path, case: Case) -> None:
    check_case(quick, case, "onednn")


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW_CASES, ids=lambda c: c.name)
def test_case_matches_onnxruntime(slow: Path, case: Case) -> None:
    check_case(slow, case, "onednn")


def test_generated_source_is_readable(quick: Path) -> None:
    text = source(quick / "build", "conv_block", "onednn")
    assert "Conv '/c1'" in text and "BatchNormalization '/bn1'" in text  # ONNX origin
    assert "folded into the weights and bias" in text
    assert "int conv_block__onednn_r0(bg_env *env" in text  # one function per region
    assert "static const bg_dnnl_conv_spec spec" in text
    assert "conv_block.onnx (graph 'conv_block'" in text and str(quick) not in text


def test_gelu_and_in_place_sum_in_the_source(slow: Path) -> None:
    text = source(slow / "build", "gelu_mlp", "onednn")
    # The first GELU is a post-op of its Gemm; the second reads an output: its own eltwise.
    assert ".alg = dnnl_eltwise_gelu_erf" in text and "bg_make_eltwise" not in text
    assert "bg_dnnl_make_eltwise, &eltwise" in text and "dnnl_eltwise_gelu_erf, .alpha" in text
    text = source(slow / "build", "resblock", "onednn")
    assert ".kind = BG_DNNL_SUM" in text and ".in_place = 1" in text


LAYOUT_CASES = [c for c in CASES if c.name in ("conv_block", "pools", "resblock",
                                                "depthwise_3d")]


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["any", "plain"])
def test_other_activation_layouts_agree(tmp_path: Path, layout: str) -> None:
    _need_onednn()
    target = composite("onednn", threads=1, activation_layout=layout)
    folder = build_cases(tmp_path, LAYOUT_CASES, target)
    for case in LAYOUT_CASES:
        check_case(folder, case, "onednn")
