"""The 9 CNN topologies shipped in onnx's backend test data (weights are ConstantOfShape)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx_builders import graph_to_onnx, random_feeds, run_ort

from buildgen.importer import import_model
from buildgen.ir import DType
from buildgen.ir.serialize import dump_graph, load_graph

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = sorted(p.stem for p in LIGHT.glob("light_*.onnx"))


def test_all_nine_topologies_are_shipped() -> None:
    assert len(MODELS) == 9, MODELS


@pytest.mark.parametrize("stem", MODELS)
def test_light_model_imports_to_static_shapes(stem: str) -> None:
    result = import_model(LIGHT / f"{stem}.onnx", {})
    graph = result.graph
    # ConstantOfShape weights fold into real weights; nothing but compute remains.
    assert not any(n.op in ("ConstantOfShape", "Unsqueeze", "Shape") for n in graph.nodes)
    assert all(w.type.dtype in (DType.FLOAT32, DType.INT64) for w in graph.weights)
    assert [v.type.shape for v in graph.inputs] == [(1, 3, 224, 224)]
    assert graph.outputs[0].type.shape in ((1, 1000), (1, 1000, 1, 1))  # squeezenet, densenet
    assert load_graph(dump_graph(graph)) == graph


@pytest.mark.parametrize("stem", ["light_squeezenet", "light_shufflenet", "light_resnet50"])
def test_light_model_numerics_match_onnxruntime(stem: str) -> None:
    path = LIGHT / f"{stem}.onnx"
    result = import_model(path, {})
    feeds = random_feeds(result.graph)
    (expected,) = run_ort(onnx.load(path), feeds)
    (actual,) = run_ort(graph_to_onnx(result.graph, result.weights_blob), feeds)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-7)


def test_five_megabyte_model_imports_in_under_a_second() -> None:
    path = LIGHT / "light_squeezenet.onnx"  # 4.9 MB of weights once folded
    import_model(path, {})  # warm: onnx's modules and the op classes load once per process
    start = time.perf_counter()
    result = import_model(path, {})
    assert time.perf_counter() - start < 1.0
    assert len(result.weights_blob) > 4_900_000
