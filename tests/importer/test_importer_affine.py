"""A per-channel Mul and Add after an inference BatchNormalization fold into its scale and
shift (importer/affine.py), with onnxruntime's values, and only where nothing else reads
what they would hide."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_builders import graph_to_onnx, make_model, random_feeds, run_ort, save

from buildgen.importer import import_model

F32 = TensorProto.FLOAT
C = 4
RNG = np.random.default_rng(5)
WEIGHTS = {
    "w": RNG.standard_normal((C, 3, 3, 3)).astype(np.float32),
    "gamma": RNG.uniform(0.5, 2, C).astype(np.float32),
    "beta": RNG.standard_normal(C).astype(np.float32),
    "mean": RNG.standard_normal(C).astype(np.float32),
    "var": RNG.uniform(0.5, 2, C).astype(np.float32),
    # Caffe2's affine channel (the onnx zoo's Inception-v2): [C, 1, 1], then [1, C, 1, 1]
    "sc_w": RNG.uniform(-2, 2, (C, 1, 1)).astype(np.float32),
    "sc_b": RNG.standard_normal((1, C, 1, 1)).astype(np.float32),
    "half": np.array(0.5, np.float32),
    "plane": RNG.standard_normal((C, 6, 6)).astype(np.float32),  # varies within a channel
}


def _model(body: list[onnx.NodeProto], outputs: tuple[str, ...] = ("y",)) -> onnx.ModelProto:
    head = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"],
                             ["b"], name="bn", epsilon=1e-3)]
    return make_model(
        [*head, *body],
        [helper.make_tensor_value_info("x", F32, [1, 3, 6, 6])],
        [helper.make_tensor_value_info(name, F32, None) for name in outputs],
        WEIGHTS)


def _imported_ops(model: onnx.ModelProto, tmp_path: Path) -> list[str]:
    result = import_model(save(model, tmp_path), {})
    feeds = random_feeds(result.graph)
    expected = run_ort(model, feeds)
    actual = run_ort(graph_to_onnx(result.graph, result.weights_blob), feeds)
    for want, got in zip(expected, actual, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return [n.op for n in result.graph.nodes]


CHAINS = {
    "mul_add": [helper.make_node("Mul", ["b", "sc_w"], ["m"], name="mul"),
                helper.make_node("Add", ["m", "sc_b"], ["a"], name="add"),
                helper.make_node("Relu", ["a"], ["y"], name="relu")],
    "constant_first": [helper.make_node("Add", ["sc_b", "b"], ["a"], name="add"),
                       helper.make_node("Mul", ["half", "a"], ["y"], name="mul")],
    "scalar_mul": [helper.make_node("Mul", ["b", "half"], ["y"], name="mul")],
}


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_a_per_channel_mul_and_add_fold_into_the_batchnorm(tmp_path: Path, chain: str
                                                           ) -> None:
    ops = _imported_ops(_model(CHAINS[chain]), tmp_path)
    assert "Mul" not in ops and "Add" not in ops
    assert ops[:2] == ["Conv", "BatchNormalization"]


def test_the_folded_output_keeps_its_name(tmp_path: Path) -> None:
    result = import_model(save(_model(CHAINS["mul_add"][:2], ("a",)), tmp_path), {})
    batchnorm = next(n for n in result.graph.nodes if n.op == "BatchNormalization")
    assert batchnorm.outputs == ("a",) and batchnorm.name == "bn"


@pytest.mark.parametrize("case", ["batchnorm_is_an_output", "batchnorm_read_twice",
                                  "varies_within_a_channel", "tensor_operand"])
def test_a_chain_that_means_something_else_stays(tmp_path: Path, case: str) -> None:
    body = [helper.make_node("Mul", ["b", "sc_w"], ["y"], name="mul")]
    outputs: tuple[str, ...] = ("y",)
    if case == "batchnorm_is_an_output":
        outputs = ("y", "b")
    elif case == "batchnorm_read_twice":
        body.append(helper.make_node("Neg", ["b"], ["n"], name="neg"))
        outputs = ("y", "n")
    elif case == "varies_within_a_channel":
        body = [helper.make_node("Mul", ["b", "plane"], ["y"], name="mul")]
    else:  # multiplied by an activation, not a constant
        body = [helper.make_node("Mul", ["b", "c"], ["y"], name="mul")]
    assert "Mul" in _imported_ops(_model(body, outputs), tmp_path)
