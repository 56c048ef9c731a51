"""bench/bench_cpu.py's pieces that need no build: the generated ResNet-18 and BERT layer
are valid ONNX that onnxruntime runs, and the report states ratios per thread count."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))

import cpu_models  # noqa: E402
import cpu_report  # noqa: E402


def test_generated_models_are_valid_and_deterministic(tmp_path: Path) -> None:
    first = cpu_models.write_generated(tmp_path / "a")
    second = cpu_models.write_generated(tmp_path / "b")
    for name, (path, inputs) in first.items():
        model = onnx.load(path)
        onnx.checker.check_model(model, full_check=True)
        assert path.read_bytes() == second[name][0].read_bytes()
        assert {i.name for i in model.graph.input} == set(inputs)
    ops = {n.op_type for n in onnx.load(first["resnet18"][0]).graph.node}
    assert {"Conv", "BatchNormalization", "MaxPool", "Add", "GlobalAveragePool", "Gemm"} <= ops
    ops = {n.op_type for n in onnx.load(first["bert"][0]).graph.node}
    assert {"MatMul", "Softmax", "Erf", "LayerNormalization", "Transpose"} <= ops


def test_bert_layer_runs_in_onnxruntime(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    path, inputs = cpu_models.write_generated(tmp_path)["bert"]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal(inputs["x"]).astype(np.float32)
    (y,) = session.run(None, {"x": x})
    assert y.shape == (1, 128, 768) and np.isfinite(y).all()
    assert abs(float(y.mean())) < 0.1 and abs(float(y.std()) - 1) < 0.1  # LayerNorm'd


def test_report_gives_the_best_build_over_onnxruntime() -> None:
    result = cpu_report.ModelResult("mlp", {
        ("c", 1): 0.5, ("c+onednn", 1): 0.2, ("onnxruntime", 1): 0.25,
        ("c+onednn", 2): 0.3, ("onnxruntime", 2): 0.2,
    })
    text = cpu_report.render([result], [1, 2], ["a note"], markdown=True)
    assert "| mlp | 0.500 | n/a | 0.200 | n/a | 0.250 | n/a | 0.80 (c+onednn) |" in text
    assert "| mlp | n/a | 0.300 | n/a | 0.200 | n/a | 1.50 (c+onednn) |" in text
    assert "### 2 threads" in text and "- a note" in text
