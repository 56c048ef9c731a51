"""Same model and shapes → same graph.json bytes and weights bytes, in any process."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import helper
from onnx_builders import F32, make_model, mlp, save

import buildgen
from buildgen.importer import import_model
from buildgen.ir.serialize import dump_graph

_SCRIPT = """
import hashlib, sys
from pathlib import Path
from buildgen.importer import import_model
from buildgen.ir.serialize import dump_graph
result = import_model(Path(sys.argv[1]), {"x": (3, 16)})
print(hashlib.sha256(dump_graph(result.graph).encode()).hexdigest())
print(hashlib.sha256(result.weights_blob).hexdigest())
"""


def _model_with_folding_and_unnamed_nodes(tmp_path: Path) -> Path:
    model, _ = mlp()
    # add a folded shape chain and nameless nodes on top of the MLP
    extra = [
        helper.make_node("Shape", ["y"], ["y_shape"]),
        helper.make_node("Concat", ["minus1", "y_shape"], ["target"], axis=0),
        helper.make_node("Slice", ["target", "zero", "two"], ["flat_shape"]),
        helper.make_node("Reshape", ["y", "flat_shape"], ["z"]),
    ]
    consts = {
        "minus1": np.array([-1], np.int64),
        "zero": np.array([0], np.int64),
        "two": np.array([2], np.int64),
        "unused": np.ones(5, np.float32),
    }
    graph = model.graph
    model = make_model(
        [*graph.node, *extra],
        list(graph.input),
        [helper.make_tensor_value_info("z", F32, None)],
    )
    model.graph.initializer.extend(graph.initializer)
    for name, value in consts.items():
        model.graph.initializer.append(onnx.numpy_helper.from_array(value, name))
    path = tmp_path / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="w.bin", size_threshold=64)
    return path


def test_same_bytes_in_one_process(tmp_path: Path) -> None:
    path = _model_with_folding_and_unnamed_nodes(tmp_path)
    first = import_model(path, {"x": (3, 16)})
    second = import_model(path, {"x": (3, 16)})
    assert dump_graph(first.graph) == dump_graph(second.graph)
    assert first.weights_blob == second.weights_blob
    assert first.graph.type_of("z").shape == (4, 3)  # y [3, 4] reshaped to [-1, 3]


def test_same_bytes_across_processes(tmp_path: Path) -> None:
    path = _model_with_folding_and_unnamed_nodes(tmp_path)
    here = import_model(path, {"x": (3, 16)})
    expected = [
        hashlib.sha256(dump_graph(here.graph).encode()).hexdigest(),
        hashlib.sha256(here.weights_blob).hexdigest(),
    ]
    repo = Path(buildgen.__file__).resolve().parent.parent
    for seed in ("1", "2"):
        # A different hash seed changes set and str-dict iteration order between runs.
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(repo)}
        out = subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(path)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
        )
        assert out.stdout.split() == expected


def test_different_shapes_give_different_bytes(tmp_path: Path) -> None:
    model, _ = mlp()
    path = save(model, tmp_path)
    a = dump_graph(import_model(path, {"x": (1, 16)}).graph)
    b = dump_graph(import_model(path, {"x": (2, 16)}).graph)
    assert a != b
