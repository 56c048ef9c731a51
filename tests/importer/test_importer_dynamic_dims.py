"""A dim written as `dim_value: -1` (PaddlePaddle's exports) is dynamic, like a symbolic or
missing dim: the manifest's `inputs:` sets it, and a graph output declared with one gets
the shape that follows from the inputs."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx_builders import F32, build_models, library_outputs, make_model, run_ort, save

from buildgen.errors import BuildgenError
from buildgen.importer import import_model

RNG = np.random.default_rng(5)


def _paddle_style(output_dims: list[int | str | None]) -> onnx.ModelProto:
    """x[-1, 16] -> MatMul -> Relu -> Reshape to (batch, 2, 4) computed from Shape(x)."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Shape", ["x"], ["xs"], name="shape", end=1),
        helper.make_node("Concat", ["xs", "tail"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["r", "target"], ["y"], name="reshape"),
    ]
    weights = {
        "w": RNG.standard_normal((16, 8)).astype(np.float32),
        "tail": np.array([2, 4], np.int64),
    }
    return make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [-1, 16])],
        [helper.make_tensor_value_info("y", F32, output_dims)],
        weights,
        name="paddle",
    )


@pytest.mark.parametrize("output_dims", [[-1, 2, 4], [-1, -1, -1], ["N", 2, -1], [None, 2, 4]])
def test_minus_one_dims_are_set_by_the_manifest(tmp_path: Path, output_dims: list) -> None:
    result = import_model(save(_paddle_style(output_dims), tmp_path), {"x": (3, 16)})
    assert result.graph.inputs[0].type.shape == (3, 16)
    assert result.graph.outputs[0].type.shape == (3, 2, 4)


def test_an_unset_minus_one_dim_is_a_dynamic_input(tmp_path: Path) -> None:
    with pytest.raises(BuildgenError) as info:
        import_model(save(_paddle_style([-1, 2, 4]), tmp_path), {}, model_name="paddle")
    text = str(info.value)
    assert "inputs with dynamic dims: 'x' [-1, 16]" in text
    assert "set it under models.paddle.inputs" in text


def test_a_fixed_dim_is_still_checked(tmp_path: Path) -> None:
    with pytest.raises(BuildgenError, match="input 'x' dim 1 is fixed to 16 .*, not 15"):
        import_model(save(_paddle_style([-1, 2, 4]), tmp_path), {"x": (3, 15)})


def test_it_builds_and_matches_onnxruntime(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) on PATH")
    model = _paddle_style([-1, -1, -1])
    done = build_models(tmp_path, {"paddle": (model, {"x": [3, 16]})})
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    feeds = {"x": RNG.standard_normal((3, 16)).astype(np.float32)}
    (expected,) = run_ort(model, feeds)
    ours = library_outputs(tmp_path, "paddle", "c", feeds)["y"]
    assert ours.shape == (3, 2, 4)
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)
