"""Small ONNX models built in code, and a way back from the IR to ONNX to check numerics.

Comparing onnxruntime on the original model with onnxruntime on the model rebuilt from the
imported IR and weights shows that folding kept the model's meaning; `build_models` and
`library_outputs` go the whole way (`buildgen build`, then the library) for models whose
trouble shows only there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
import yaml
from onnx import TensorProto, helper, numpy_helper

from buildgen.ir import Graph, Value
from buildgen.ir.serialize import load_weights

REPO = Path(__file__).resolve().parents[2]
OPSET = 17
F32 = TensorProto.FLOAT
I64 = TensorProto.INT64


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = OPSET,
    name: str = "test",
) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes),
        name,
        list(inputs),
        list(outputs),
        initializer=[numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def save(model: onnx.ModelProto, folder: Path, name: str = "model.onnx") -> Path:
    path = folder / name
    onnx.save(model, path)
    return path


def mlp(batch: int | str = "N") -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """x[batch, 16] → MatMul → Add → Relu → Gemm → y[batch, 4]."""
    rng = np.random.default_rng(0)
    weights = {
        "w1": rng.standard_normal((16, 32)).astype(np.float32),
        "b1": rng.standard_normal(32).astype(np.float32),
        "w2": rng.standard_normal((4, 32)).astype(np.float32),
        "b2": rng.standard_normal(4).astype(np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1/MatMul"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="fc1/Add"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("Gemm", ["h2", "w2", "b2"], ["y"], name="fc2", transB=1, alpha=0.5),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [batch, 16])],
        [helper.make_tensor_value_info("y", F32, [batch, 4])],
        weights,
        name="mlp",
    )
    return model, weights


def graph_to_onnx(graph: Graph, weights_blob: bytes) -> onnx.ModelProto:
    """The IR and its weights as an ONNX model again (weights become initializers)."""
    arrays = load_weights(graph, weights_blob)
    nodes = []
    for node in graph.nodes:
        attrs = {}
        for key, value in node.attrs:
            attrs[key] = list(value) if isinstance(value, tuple) else value
        nodes.append(
            helper.make_node(
                node.op,
                list(node.inputs),
                list(node.outputs),
                node.name,
                domain=node.domain or None,
                **attrs,
            )
        )
    elem = {"float32": F32, "int64": I64, "int32": TensorProto.INT32, "bool": TensorProto.BOOL}

    def info(value: Value) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(
            value.name, elem[value.type.dtype.value], list(value.type.shape)
        )

    onnx_graph = helper.make_graph(
        nodes,
        graph.name,
        [info(v) for v in graph.inputs],
        [info(v) for v in graph.outputs],
        initializer=[numpy_helper.from_array(np.array(a), k) for k, a in arrays.items()],
    )
    return helper.make_model(
        onnx_graph, opset_imports=[helper.make_opsetid("", graph.opset)], ir_version=8
    )


def run_ort(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return [np.asarray(x) for x in session.run(None, dict(feeds))]


def random_feeds(graph: Graph, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in graph.inputs:
        shape = value.type.shape
        if value.type.dtype.value == "float32":
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
        elif value.type.dtype.value == "bool":
            feeds[value.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            feeds[value.name] = rng.integers(0, 8, shape).astype(value.type.dtype.value)
    return feeds


def build_models(
    folder: Path,
    models: Mapping[str, tuple[onnx.ModelProto, Mapping[str, Sequence[int]]]],
    targets: Sequence[str] | Mapping[str, Sequence[str]] = ("c",),
    composites: Mapping[str, Mapping[str, object]] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Save each (model, manifest inputs) as folder/<name>.onnx, write a BUILD.yaml building
    it for `targets` (kinds, or names of `composites`; or per model name), and run
    `buildgen build` into folder/build as the build's actions would (this checkout on
    PYTHONPATH)."""
    entries: dict[str, dict[str, object]] = {}
    for name, (model, inputs) in sorted(models.items()):
        onnx.save(model, folder / f"{name}.onnx")
        wanted = targets[name] if isinstance(targets, Mapping) else targets
        entries[name] = {"source": f"{name}.onnx", "targets": list(wanted)}
        if inputs:
            entries[name]["inputs"] = {k: list(v) for k, v in inputs.items()}
    doc: dict[str, object] = {"buildgen": 1, "models": entries}
    if composites:
        doc["targets"] = {k: dict(v) for k, v in composites.items()}
    manifest = folder / "BUILD.yaml"
    manifest.write_text(yaml.safe_dump(doc, sort_keys=True))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "buildgen", "build", "--manifest", str(manifest),
               "--build-dir", str(folder / "build")]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)


def library_outputs(
    folder: Path, model: str, target: str, feeds: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The outputs of folder/build/<model>/<target>/lib<model>.so on `feeds`."""
    from buildgen import runtime

    compiled = runtime.load(folder / "build" / model / target / f"lib{model}.so")
    try:
        return compiled.run(feeds)
    finally:
        compiled.close()
