"""LSTM, GRU and RNN on the c backend: small models built by `buildgen build` and run through
buildgen.runtime, every output compared with onnxruntime; and the decline reasons.

onnxruntime runs only layout 0, so a layout-1 model is checked against the same node with
layout 0 on transposed inputs (and its outputs transposed back).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from c_ir import F32, ir_graph, ir_node
from onnx import TensorProto, helper, numpy_helper

from buildgen import runtime
from buildgen.backends.c import CBackend

REPO = Path(__file__).resolve().parents[3]
RTOL, ATOL = 1e-4, 1e-5
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


@dataclass
class Model:
    """One recurrent node with random weights (initializers) and run-time inputs."""

    op: str
    steps: int = 5
    batch: int = 3
    inputs: int = 4
    hidden: int = 6
    attrs: dict[str, object] = field(default_factory=dict)
    bias: bool = True
    lens: list[int] | None = None
    initial_h: bool = False
    initial_c: bool = False
    peepholes: bool = False
    outputs: tuple[str, ...] = ("Y", "Y_h", "Y_c")

    @property
    def directions(self) -> int:
        return 2 if self.attrs.get("direction") == "bidirectional" else 1

    @property
    def layout(self) -> int:
        value = self.attrs.get("layout", 0)
        assert isinstance(value, int)
        return value

    def build(self, seed: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
        rng = np.random.default_rng(seed)
        t, b, d, h = self.steps, self.batch, self.directions, self.hidden
        gh = GATES[self.op] * h
        x_shape = (t, b, self.inputs) if self.layout == 0 else (b, t, self.inputs)
        state_shape = (d, b, h) if self.layout == 0 else (b, d, h)
        feeds = {"X": rng.standard_normal(x_shape).astype(np.float32)}
        weights = {
            "W": rng.uniform(-0.5, 0.5, (d, gh, self.inputs)).astype(np.float32),
            "R": rng.uniform(-0.5, 0.5, (d, gh, h)).astype(np.float32),
        }
        names = ["X", "W", "R", "", "", "", "", ""]
        if self.bias:
            weights["B"] = rng.uniform(-0.5, 0.5, (d, 2 * gh)).astype(np.float32)
            names[3] = "B"
        if self.lens is not None:
            feeds["sequence_lens"] = np.array(self.lens, dtype=np.int32)
            names[4] = "sequence_lens"
        for index, name, wanted in (
            (5, "initial_h", self.initial_h),
            (6, "initial_c", self.initial_c),
        ):
            if wanted:
                feeds[name] = rng.standard_normal(state_shape).astype(np.float32)
                names[index] = name
        if self.peepholes:
            weights["P"] = rng.uniform(-0.5, 0.5, (d, 3 * h)).astype(np.float32)
            names[7] = "P"
        while names[-1] == "":
            names.pop()
        outputs = list(self.outputs if self.op == "LSTM" else self.outputs[:2])
        node = helper.make_node(self.op, names, outputs, hidden_size=h, **self.attrs)
        graph = helper.make_graph(
            [node],
            "recurrent",
            [
                helper.make_tensor_value_info(
                    k, TensorProto.INT32 if v.dtype == np.int32 else TensorProto.FLOAT, v.shape
                )
                for k, v in feeds.items()
            ],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o],
            [numpy_helper.from_array(v, k) for k, v in weights.items()],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
        return onnx.shape_inference.infer_shapes(model, strict_mode=True), feeds


MODELS: dict[str, Model] = {
    "lstm_bidirectional": Model(
        "LSTM",
        attrs={"direction": "bidirectional"},
        lens=[5, 2, 0],
        initial_h=True,
        initial_c=True,
        peepholes=True,
    ),
    "lstm_reverse_clip_input_forget": Model(
        "LSTM",
        attrs={"direction": "reverse", "clip": 0.8, "input_forget": 1},
        lens=[3, 5, 1],
        initial_h=True,
        outputs=("", "Y_h", "Y_c"),
    ),
    "gru_linear_before_reset_0": Model(
        "GRU", attrs={"direction": "bidirectional"}, lens=[4, 1, 5], initial_h=True
    ),
    "gru_linear_before_reset_1": Model(
        "GRU",
        attrs={"linear_before_reset": 1, "direction": "reverse"},
        lens=[2, 5, 3],
        initial_h=True,
    ),
    "gru_activations_no_bias": Model(
        "GRU",
        attrs={"activations": ["HardSigmoid", "LeakyRelu"], "activation_alpha": [0.3, 0.2]},
        bias=False,
    ),
    "rnn_reverse": Model("RNN", attrs={"direction": "reverse"}, lens=[4, 5, 2], initial_h=True),
    "lstm_layout_1": Model(
        "LSTM",
        attrs={"layout": 1, "direction": "bidirectional"},
        lens=[5, 3, 1],
        initial_h=True,
        initial_c=True,
    ),
    "gru_layout_1": Model("GRU", attrs={"layout": 1}, initial_h=True),
    "rnn_layout_1": Model(
        "RNN", attrs={"layout": 1, "direction": "bidirectional", "activations": ["Relu", "Tanh"]}
    ),
}


def _run_build(manifest: Path, build_dir: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "buildgen", "build", "--manifest", str(manifest)]
    cmd += ["--build-dir", str(build_dir)]
    done = subprocess.run(cmd, cwd=manifest.parent, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"buildgen build failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")


Built = dict[str, tuple[onnx.ModelProto, dict[str, np.ndarray], Path]]


@pytest.fixture(scope="module")
def built(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Every model of MODELS built for the c target in one `buildgen build`:
    name -> (model, test inputs, library)."""
    folder = tmp_path_factory.mktemp("recurrent")
    entries, result = {}, {}
    for seed, (name, spec) in enumerate(sorted(MODELS.items())):
        model, feeds = spec.build(seed)
        onnx.save(model, folder / f"{name}.onnx")
        result[name] = (model, feeds, folder / "build" / name / "c" / f"lib{name}.so")
        entries[name] = {
            "source": f"{name}.onnx",
            "inputs": {k: list(v.shape) for k, v in feeds.items()},
            "targets": ["c"],
        }
    manifest = folder / "BUILD.yaml"
    manifest.write_text(yaml.safe_dump({"buildgen": 1, "models": entries}, sort_keys=True))
    _run_build(manifest, folder / "build")
    return result


def _as_layout_0(model: onnx.ModelProto, feeds: dict[str, np.ndarray]):
    """The same node with layout 0, and the feeds transposed to match."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    node = copy.graph.node[0]
    for attr in [a for a in node.attribute if a.name == "layout"]:
        node.attribute.remove(attr)
    swapped = {k: v.swapaxes(0, 1).copy() if k != "sequence_lens" else v for k, v in feeds.items()}
    for value in copy.graph.input:
        if value.name in swapped:
            dims = value.type.tensor_type.shape.dim
            for dim, size in zip(dims, swapped[value.name].shape, strict=True):
                dim.dim_value = size
    del copy.graph.value_info[:]
    for value in copy.graph.output:
        value.type.tensor_type.ClearField("shape")
    return copy, swapped


def _onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    layout = any(a.name == "layout" and a.i == 1 for a in model.graph.node[0].attribute)
    if layout:
        model, feeds = _as_layout_0(model, feeds)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [o.name for o in session.get_outputs()]
    outputs = dict(zip(names, session.run(None, feeds), strict=True))
    if layout:
        outputs = {k: _to_layout_1(v) for k, v in outputs.items()}
    return outputs


def _to_layout_1(value: np.ndarray) -> np.ndarray:
    """Y [T, D, B, H] -> [B, T, D, H]; Y_h, Y_c [D, B, H] -> [B, D, H]."""
    return value.transpose(2, 0, 1, 3) if value.ndim == 4 else value.swapaxes(0, 1)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_matches_onnxruntime(built: Built, name: str) -> None:
    model, feeds, library = built[name]
    compiled = runtime.load(library)
    ours = compiled.run(feeds)
    compiled.close()
    theirs = _onnxruntime(model, feeds)
    assert set(ours) == set(theirs) == {o.name for o in model.graph.output}
    for output, value in ours.items():
        np.testing.assert_allclose(value, theirs[output], rtol=RTOL, atol=ATOL, err_msg=output)


def test_bad_sequence_length_fails_the_call(built: Built) -> None:
    _, feeds, library = built["rnn_reverse"]
    feeds = {**feeds, "sequence_lens": np.array([4, 6, 2], dtype=np.int32)}  # 6 > T = 5
    compiled = runtime.load(library)
    with pytest.raises(runtime.ModelError, match="sequence_lens"):
        compiled.run(feeds)
    compiled.close()


def _reason(op: str, **attrs: object) -> str | None:
    gh = GATES[op] * 6
    types = {
        "x": (F32, (5, 3, 4)),
        "w": (F32, (1, gh, 4)),
        "r": (F32, (1, gh, 6)),
        "y": (F32, (5, 1, 3, 6)),
    }
    node = ir_node(op, ["x", "w", "r"], ["y"], **attrs)
    graph = ir_graph([node], types, ["x"], ["y"], ("w", "r"))
    return CBackend().decline_reason(node, graph)


def test_decline_reasons_name_the_attribute() -> None:
    assert _reason("LSTM") is None
    assert _reason("GRU", linear_before_reset=1, clip=1.0) is None
    assert _reason("RNN", activations=["Affine"], activation_alpha=[0.5]) is None
    assert "activations" in (_reason("GRU", activations=["Sigmoid", "Swish"]) or "")
    assert "activations" in (_reason("LSTM", activations=["Sigmoid", "Tanh"]) or "")
    assert "direction" in (_reason("RNN", direction="sideways") or "")
    assert "direction" in (_reason("RNN", direction="bidirectional") or "")  # W has 1
    assert "layout" in (_reason("LSTM", layout=2) or "")
    assert "output_sequence" in (_reason("RNN", output_sequence=1) or "")
    assert "hidden_size" in (_reason("GRU", hidden_size=7) or "")
