"""Every example model (root BUILD.yaml) built with c + onednn, two OpenMP threads, matches
onnxruntime, and `buildgen explain` says which regions oneDNN ran."""

from __future__ import annotations

from pathlib import Path

import pytest
from cpulib_build import (
    assert_matches_onnxruntime,
    build_examples,
    composite,
    example_models,
    explain,
    library,
    ops_on,
)

from buildgen.backends.libraries import ONEDNN_PIP, pip_onednn_prefix
from buildgen.errors import BuildgenError

pytestmark = pytest.mark.slow
pytest.importorskip("onnxruntime")
MODELS = example_models()


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        pip_onednn_prefix()
    except BuildgenError:
        pytest.skip(f"oneDNN is not installed: {ONEDNN_PIP}")
    return build_examples(tmp_path_factory.mktemp("onednn-examples"),
                          composite("onednn", threads=2))


@pytest.mark.parametrize("model", sorted(MODELS))
def test_example_matches_onnxruntime(build_dir: Path, model: str) -> None:
    assert {"Gemm", "MatMul", "Conv"} & ops_on(build_dir, model, "onednn")
    assert_matches_onnxruntime(library(build_dir, model), MODELS[model][0], seed=len(model))


def test_explain_names_the_library(build_dir: Path) -> None:
    text = explain(build_dir.parent, "encoder")
    assert "onednn (accelerator)" in text and "pattern onednn.layer_norm" in text
    assert "no onednn pattern covers Transpose" in text
