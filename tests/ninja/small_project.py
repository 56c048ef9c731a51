"""A one-model project small enough to build for real in a few seconds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path


def save_tiny_model(path: Path, hidden: int = 8) -> None:
    """relu(x @ w + b), x: [n, 4], with fixed random weights."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(hidden)
    w = numpy_helper.from_array(rng.standard_normal((4, hidden)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(hidden).astype(np.float32), "b")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
            helper.make_node("Add", ["h", "b"], ["hb"], name="add"),
            helper.make_node("Relu", ["hb"], ["y"], name="relu"),
        ],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w, b],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.save(model, path)


def write_project(root: Path, launcher: Sequence[str] | None = None) -> Path:
    """root/BUILD.yaml building models/tiny.onnx for one c target; returns the manifest."""
    save_tiny_model(root / "models" / "tiny.onnx")
    host: dict[str, object] = {"kind": "c", "opt_level": 1}
    if launcher is not None:
        host["compiler_launcher"] = list(launcher)
    # JSON is YAML: the launcher's strings (paths) need no YAML quoting of their own.
    manifest = root / "BUILD.yaml"
    manifest.write_text(
        "buildgen: 1\n"
        f"targets:\n  cpu: {json.dumps(host)}\n"
        "models:\n  tiny:\n    source: models/tiny.onnx\n    inputs: {x: [2, 4]}\n"
        "    targets: [cpu]\n"
    )
    return manifest
