"""Every example model (root BUILD.yaml) built with c + openblas, two OpenBLAS threads,
matches onnxruntime, and `buildgen explain` says which regions OpenBLAS ran."""

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

pytestmark = pytest.mark.slow
pytest.importorskip("onnxruntime")
pytest.importorskip("scipy_openblas32", reason="pip install scipy-openblas32")
MODELS = example_models()


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_examples(tmp_path_factory.mktemp("openblas-examples"),
                          composite("openblas", threads=2))


@pytest.mark.parametrize("model", sorted(MODELS))
def test_example_matches_onnxruntime(build_dir: Path, model: str) -> None:
    assert {"Gemm", "MatMul", "Conv"} & ops_on(build_dir, model, "openblas")
    assert_matches_onnxruntime(library(build_dir, model), MODELS[model][0], seed=len(model))


def test_explain_names_the_library(build_dir: Path) -> None:
    text = explain(build_dir.parent, "cnn")
    assert "openblas (accelerator)" in text and "pattern openblas.conv" in text
    assert "no openblas pattern covers MaxPool" in text
