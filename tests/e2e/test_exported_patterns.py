"""Patterns exporters emit, built by `buildgen build` and checked against onnxruntime:

* attention with a boolean mask as torch exports it: a fully masked query row makes
  Softmax 0/0 = NaN, and Where(IsNaN(p), 0, p) zeroes it (a bool intermediate feeding
  Where);
* Pad whose pads come from a constant subgraph (Constant, Cast, Concat), which the
  importer folds.

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


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory, buildgen_build) -> Path:
    folder = tmp_path_factory.mktemp("exported-patterns")
    onnx.save(masked_attention_model(), folder / "attn.onnx")
    manifest = {
        "buildgen": 1,
        "targets": {"fastmath": TARGETS["fastmath"]},
        "models": {"attn": {"source": "attn.onnx", "targets": ["c", "fastmath"]}},
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
