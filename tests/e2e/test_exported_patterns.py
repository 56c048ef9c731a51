"""Patterns exporters emit, built by `buildgen build` and checked against onnxruntime:

* attention with a boolean mask as torch exports it: a fully masked query row makes
  Softmax 0/0 = NaN, and Where(IsNaN(p), 0, p) zeroes it (a bool intermediate feeding
  Where);
* Pad whose pads come from a constant subgraph (Constant, Cast, Concat), which the
  importer folds;
* an If on the model's own score (openwakeword's hey_jarvis runs a verifier network only
  past a threshold), which the importer flattens into both branches and a select: right
  on inputs that take either branch.

Both are built for the plain `c` host and for one compiled with -ffast-math, under which
the compiler may fold isnan() to 0: the generated test must still see the NaN.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper

from buildgen import runtime

TARGETS = {"plain": "c", "fastmath": {"kind": "c", "cflags": ["-ffast-math"]}}
B, H, S, D = 1, 2, 5, 8


def masked_attention_model() -> onnx.ModelProto:
    n = helper.make_node
    nodes = [
        n("Transpose", ["k"], ["kt"], name="/attn/Transpose", perm=[0, 1, 3, 2]),
        n("MatMul", ["q", "kt"], ["qk"], name="/attn/MatMul"),
        n("Mul", ["qk", "scale"], ["scores"], name="/attn/Mul"),
        n("Where", ["mask", "scores", "minus_inf"], ["masked"], name="/attn/Where"),
        n("Softmax", ["masked"], ["probs"], name="/attn/Softmax", axis=-1),
        n("IsNaN", ["probs"], ["nan"], name="/attn/IsNaN"),
        n("Where", ["nan", "zero", "probs"], ["clean"], name="/attn/Where_1"),
        n("MatMul", ["clean", "v"], ["ctx"], name="/attn/MatMul_1"),
        # Pad the context's sequence axis by pads computed from constants
        n("Constant", [], ["begin"], name="/pad/Constant",
          value=helper.make_tensor("begin", TensorProto.INT32, [4], [0, 0, 1, 0])),
        n("Cast", ["begin"], ["begin64"], name="/pad/Cast", to=TensorProto.INT64),
        n("Constant", [], ["end"], name="/pad/Constant_1", value_ints=[0, 0, 2, 0]),
        n("Concat", ["begin64", "end"], ["pads"], name="/pad/Concat", axis=0),
        n("Pad", ["ctx", "pads"], ["y"], name="/pad/Pad", mode="reflect"),
    ]  # fmt: skip
    data = [helper.make_tensor_value_info(name, TensorProto.FLOAT, (B, H, S, D)) for name in "qkv"]
    mask = helper.make_tensor_value_info("mask", TensorProto.BOOL, (S, S))
    constants = [
        numpy_helper.from_array(np.array(1.0 / np.sqrt(D), np.float32), "scale"),
        numpy_helper.from_array(np.array(-np.inf, np.float32), "minus_inf"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
    ]
    outputs = [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
        helper.make_tensor_value_info("clean", TensorProto.FLOAT, None),
    ]
    graph = helper.make_graph(nodes, "masked_attention", [*data, mask], outputs, constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def gated_score_model() -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    n = helper.make_node
    verify = helper.make_graph(
        [n("MatMul", ["x", "vw"], ["vh"], name="/verify/MatMul"),
         n("Sigmoid", ["vh"], ["p2"], name="/verify/Sigmoid")],
        "verify", [], [helper.make_tensor_value_info("p2", TensorProto.FLOAT, [1, 1])],
        [numpy_helper.from_array(rng.standard_normal((8, 1)).astype(np.float32), "vw")])
    keep = helper.make_graph(
        [n("Identity", ["p1"], ["kept"])], "keep", [],
        [helper.make_tensor_value_info("kept", TensorProto.FLOAT, [1, 1])])
    nodes = [
        n("MatMul", ["x", "w"], ["h"], name="/score/MatMul"),
        n("Sigmoid", ["h"], ["p1"], name="/score/Sigmoid"),
        n("GreaterOrEqual", ["p1", "half"], ["pass"], name="/score/GreaterOrEqual"),
        n("If", ["pass"], ["y"], name="/If", then_branch=verify, else_branch=keep),
    ]
    weights = [numpy_helper.from_array(GATE_W, "w"),
               numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    graph = helper.make_graph(
        nodes, "gated_score", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


GATE_W = np.random.default_rng(4).standard_normal((8, 1)).astype(np.float32)


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory, buildgen_build) -> Path:
    folder = tmp_path_factory.mktemp("exported-patterns")
    onnx.save(masked_attention_model(), folder / "attn.onnx")
    onnx.save(gated_score_model(), folder / "gated.onnx")
    manifest = {
        "buildgen": 1,
        "targets": {"fastmath": TARGETS["fastmath"]},
        "models": {"attn": {"source": "attn.onnx", "targets": ["c", "fastmath"]},
                   "gated": {"source": "gated.onnx", "targets": ["c"]}},
    }
    (folder / "BUILD.yaml").write_text(yaml.safe_dump(manifest, sort_keys=True))
    buildgen_build(folder / "BUILD.yaml", folder / "build")
    return folder


@pytest.mark.parametrize("target", ["c", "fastmath"])
def test_masked_attention_and_folded_pads_match_onnxruntime(
    build: Path, target: str, onnxruntime_outputs
) -> None:
    rng = np.random.default_rng(23)
    mask = np.tril(np.ones((S, S), bool))
    mask[3] = False  # query 3 may attend to nothing: its Softmax row is NaN
    feeds = {name: rng.standard_normal((B, H, S, D)).astype(np.float32) for name in "qkv"}
    feeds["mask"] = mask
    compiled = runtime.load(build / "build" / "attn" / target / "libattn.so")
    ours = compiled.run(feeds)
    compiled.close()
    y, clean = onnxruntime_outputs(build / "attn.onnx", feeds)
    assert not np.isnan(ours["clean"]).any()
    np.testing.assert_array_equal(ours["clean"][:, :, 3], 0.0)
    np.testing.assert_allclose(ours["clean"], clean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours["y"], y, rtol=1e-4, atol=1e-5)
    assert ours["y"].shape == (B, H, S + 3, D)


@pytest.mark.parametrize("side", [3.0, -3.0], ids=["verified", "kept"])
def test_an_if_on_the_models_own_score_takes_either_branch(
    build: Path, side: float, onnxruntime_outputs
) -> None:
    x = (side * GATE_W.T / np.linalg.norm(GATE_W)).astype(np.float32)  # score ~ sigmoid(3)
    p1 = 1 / (1 + np.exp(-(x @ GATE_W)))
    assert (p1 >= 0.5).item() == (side > 0)
    compiled = runtime.load(build / "build" / "gated" / "c" / "libgated.so")
    ours = compiled.run({"x": x})
    compiled.close()
    (expected,) = onnxruntime_outputs(build / "gated.onnx", {"x": x})
    np.testing.assert_allclose(ours["y"], expected, rtol=1e-5, atol=1e-6)
    if side < 0:  # the kept score, not the verifier's
        np.testing.assert_allclose(ours["y"], p1, rtol=1e-5)
