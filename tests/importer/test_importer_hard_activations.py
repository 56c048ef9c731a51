"""Hard activations written out in elementary ops import as HardSwish / HardSigmoid
(importer/activations.py), with onnxruntime's values, and only where the chain's inner
values are read by the chain alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_builders import graph_to_onnx, make_model, random_feeds, run_ort, save

from buildgen.importer import import_model

F32 = TensorProto.FLOAT


def _scalar(name: str, value: float) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=f"const_{name}",
                            value=helper.make_tensor(name, F32, [], [value]))


def _model(body: list[onnx.NodeProto], outputs: tuple[str, ...] = ("y",),
           opset: int = 17) -> onnx.ModelProto:
    # Constants as nodes (as Paddle's exporter writes them): the rewrite runs after folding
    constants = [_scalar("three", 3.0), _scalar("zero", 0.0), _scalar("six", 6.0),
                 _scalar("sixth", 1.0 / 6.0)]
    return make_model(
        [*constants, helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), *body],
        [helper.make_tensor_value_info("x", F32, [1, 2, 5, 5])],
        [helper.make_tensor_value_info(name, F32, None) for name in outputs],
        {"w": np.random.default_rng(3).standard_normal((4, 2, 1, 1)).astype(np.float32)},
        opset=opset)


def _head(clip_inputs: tuple[str, ...] = ("a", "zero", "six")) -> list[onnx.NodeProto]:
    return [helper.make_node("Add", ["c", "three"], ["a"], name="add3"),
            helper.make_node("Clip", list(clip_inputs), ["k"], name="clip")]


CHAINS = {
    # Paddle: x * Clip(x + 3, 0, 6) / 6
    "mul_then_div": (_head() + [
        helper.make_node("Mul", ["c", "k"], ["m"], name="mul"),
        helper.make_node("Div", ["m", "six"], ["y"], name="div")], "HardSwish"),
    # Clip(...) * (1/6) * x, operands the other way round
    "sixth_then_mul": (_head() + [
        helper.make_node("Mul", ["sixth", "k"], ["h"], name="mul6"),
        helper.make_node("Mul", ["h", "c"], ["y"], name="mulx")], "HardSwish"),
    "hard_sigmoid": (_head() + [helper.make_node("Div", ["k", "six"], ["y"], name="div")],
                     "HardSigmoid"),
    # torch below opset 14: x * HardSigmoid(x, 1/6, 1/2)
    "mul_of_hard_sigmoid": ([
        helper.make_node("HardSigmoid", ["c"], ["h"], name="hsig", alpha=1.0 / 6.0, beta=0.5),
        helper.make_node("Mul", ["c", "h"], ["y"], name="mul")], "HardSwish"),
}


def _imported_ops(model: onnx.ModelProto, tmp_path: Path) -> list[str]:
    result = import_model(save(model, tmp_path), {})
    feeds = random_feeds(result.graph)
    feeds["x"] = feeds["x"] * 4  # values on both sides of the clamps
    expected = run_ort(model, feeds)
    imported = graph_to_onnx(result.graph, result.weights_blob)
    if any(n.op == "HardSwish" for n in result.graph.nodes):  # HardSwish-14 in an older graph
        imported.opset_import[0].version = max(14, result.graph.opset)
    actual = run_ort(imported, feeds)
    for want, got in zip(expected, actual, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return [n.op for n in result.graph.nodes]


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_a_written_out_hard_activation_is_one_op(tmp_path: Path, chain: str) -> None:
    body, op = CHAINS[chain]
    assert _imported_ops(_model(body), tmp_path) == ["Conv", op]


def test_clip_bounds_as_attributes_before_opset_11(tmp_path: Path) -> None:
    body = [helper.make_node("Add", ["c", "three"], ["a"], name="add3"),
            helper.make_node("Clip", ["a"], ["k"], name="clip", min=0.0, max=6.0),
            helper.make_node("Mul", ["c", "k"], ["m"], name="mul"),
            helper.make_node("Div", ["m", "six"], ["y"], name="div")]
    assert _imported_ops(_model(body, opset=10), tmp_path) == ["Conv", "HardSwish"]


@pytest.mark.parametrize("case", ["inner_value_is_an_output", "inner_value_read_twice",
                                  "other_bounds", "other_tensor"])
def test_a_chain_that_means_something_else_stays(tmp_path: Path, case: str) -> None:
    body, _ = CHAINS["mul_then_div"]
    outputs: tuple[str, ...] = ("y",)
    if case == "inner_value_is_an_output":
        outputs = ("y", "k")
    elif case == "inner_value_read_twice":
        body = [*body, helper.make_node("Neg", ["a"], ["n"], name="neg")]
        outputs = ("y", "n")
    elif case == "other_bounds":
        body = _head(("a", "zero", "three")) + body[2:]
    else:  # multiplied by another tensor than the one clamped
        body = _head() + [helper.make_node("Mul", ["c2", "k"], ["m"], name="mul"), body[3]]
        body = [helper.make_node("Conv", ["x", "w"], ["c2"], name="conv2"), *body]
    ops = _imported_ops(_model(body, outputs), tmp_path)
    assert "HardSwish" not in ops and "Clip" in ops
