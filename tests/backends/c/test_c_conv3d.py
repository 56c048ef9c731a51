"""3-D Conv (video and volumetric models) on the c host against onnxruntime: strides,
dilations, pads and auto_pad, groups, no bias, and the epilogues the fusion pass gives a
Conv (bias, a folded BatchNormalization, an activation). Also PRelu at opset 6, whose
slope of shape [C] is per channel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_cases import Case, CaseResults, node, rand, run_cases

RNG = np.random.default_rng(3)


def _conv(name: str, x: tuple[int, ...], w: tuple[int, ...], bias: bool = True,
          after: tuple[str, ...] = (), **attrs: object) -> Case:
    weights = {"w": rand(RNG, *w, low=-0.5, high=0.5)}
    inputs = ["x", "w"]
    if bias:
        weights["b"] = rand(RNG, w[0])
        inputs.append("b")
    nodes = [node("Conv", inputs, ["c"], **attrs)]
    last = "c"
    for op in after:
        if op == "BatchNormalization":
            for stat, low in (("scale", 0.5), ("shift", -1.0), ("mean", -1.0), ("var", 0.5)):
                weights[stat] = rand(RNG, w[0], low=low, high=1.5)
            nodes.append(node(op, [last, "scale", "shift", "mean", "var"], [f"{op}_y"]))
        else:
            nodes.append(node(op, [last], [f"{op}_y"]))
        last = f"{op}_y"
    nodes.append(node("Identity", [last], ["y"]))
    return Case(name, nodes, {"x": rand(RNG, *x)}, ["y"], weights)


CASES = [
    _conv("plain", (1, 3, 5, 6, 7), (4, 3, 3, 3, 3)),
    _conv("strided_padded", (2, 2, 7, 6, 5), (3, 2, 3, 2, 3), strides=[2, 1, 2],
          pads=[1, 0, 1, 1, 1, 0]),
    _conv("dilated", (1, 2, 8, 7, 6), (2, 2, 2, 3, 2), dilations=[2, 1, 2]),
    _conv("same_upper", (1, 2, 5, 5, 5), (2, 2, 3, 3, 3), auto_pad="SAME_UPPER", strides=[2, 2, 2]),
    _conv("groups_no_bias", (1, 4, 4, 5, 6), (6, 2, 1, 3, 3), bias=False, group=2),
    _conv("bn_relu", (1, 3, 4, 6, 6), (5, 3, 3, 3, 3), after=("BatchNormalization", "Relu")),
    _conv("sigmoid", (1, 2, 3, 4, 5), (3, 2, 1, 1, 1), after=("Sigmoid",)),
]


@pytest.fixture(scope="module")
def results(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return run_cases(CASES, 17, tmp_path_factory.mktemp("c_conv3d"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(results: CaseResults, case: Case) -> None:
    results.check(case)


def test_the_epilogue_is_fused_into_the_conv(results: CaseResults) -> None:
    """Conv, BatchNormalization and Relu are one kernel whose store applies all three."""
    assert "bg_act_scalar(acc" in results.source
    assert "bg_batchnorm_fold(" in results.source


def test_prelu_at_opset_6_takes_a_per_channel_slope(c_toolchain: None, tmp_path: Path) -> None:
    """onnxruntime has no PRelu-6, so the expected values are computed here."""
    from c_cases import merged_model, run_c

    x = rand(RNG, 2, 3, 4, 5)
    slope = np.array([0.1, -0.5, 2.0], np.float32)
    case = Case("prelu6", [node("PRelu", ["x", "s"], ["y"])], {"x": x}, ["y"], {"s": slope})
    actual, _ = run_c(merged_model([case], 6), {"prelu6.x": x}, [case], tmp_path, None)
    want = np.where(x < 0, x * slope.reshape(3, 1, 1), x)
    np.testing.assert_allclose(actual["prelu6.y"], want, rtol=1e-6)
