"""A model cannot make the import (or later stages) unbounded: bytes, nodes, tensor sizes.

Each bound is an error that names the model, the amount and the limit, and says which
environment variable raises it; raising it lets the same model through.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx_builders import F32, make_model, mlp, save

from buildgen.errors import BuildgenError
from buildgen.importer import import_model
from buildgen.limits import GIB


def _chain(count: int) -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(count)]
    return make_model(nodes, [helper.make_tensor_value_info("t0", F32, [4])],
                      [helper.make_tensor_value_info(f"t{count}", F32, [4])])


def test_more_nodes_than_the_limit_is_refused_and_the_limit_can_be_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = save(_chain(11), tmp_path)
    monkeypatch.setenv("BUILDGEN_MAX_NODES", "10")
    with pytest.raises(BuildgenError) as caught:
        import_model(path, {})
    message = caught.value.render()
    assert f"{path}: nodes: 11 is more than the limit on a model's nodes" in message
    assert "BUILDGEN_MAX_NODES=11" in message
    monkeypatch.setenv("BUILDGEN_MAX_NODES", "11")
    assert len(import_model(path, {}).graph.nodes) == 11


def test_nodes_inside_subgraphs_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    branch = helper.make_graph(
        [helper.make_node("Relu", ["x"], [f"r{i}"]) for i in range(5)] +
        [helper.make_node("Identity", ["r0"], ["out"])],
        "branch", [], [helper.make_tensor_value_info("out", F32, [4])],
    )
    node = helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=branch)
    model = make_model([node], [helper.make_tensor_value_info("cond", onnx.TensorProto.BOOL, []),
                                helper.make_tensor_value_info("x", F32, [4])],
                       [helper.make_tensor_value_info("y", F32, [4])])
    path = save(model, tmp_path)
    monkeypatch.setenv("BUILDGEN_MAX_NODES", "12")  # 1 If + 2 x 6 in its branches = 13
    with pytest.raises(BuildgenError, match="nodes: 13 is more than the limit"):
        import_model(path, {})


def test_a_huge_declared_tensor_is_refused_before_anything_plans_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, _ = mlp()  # x: [N, 16]
    path = save(model, tmp_path)
    with pytest.raises(BuildgenError) as caught:
        import_model(path, {"x": (2**31, 16)})  # h0 is [2^31, 32]: 256 GiB of float32
    message = caught.value.render()
    assert ("tensor 'h0' of shape [2147483648, 32], the largest, bytes: 274,877,906,944 is "
            "more than the limit") in message
    assert "BUILDGEN_MAX_TENSOR_BYTES=256GiB" in message
    monkeypatch.setenv("BUILDGEN_MAX_TENSOR_BYTES", "256GiB")
    graph = import_model(path, {"x": (2**31, 16)}).graph
    assert {v.name: v.type.shape for v in graph.values}["y"] == (2**31, 4)


def test_the_model_bytes_limit_counts_external_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, _ = mlp(batch=1)
    path = tmp_path / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="weights.bin",
              size_threshold=0)
    small = path.stat().st_size
    total = small + (tmp_path / "weights.bin").stat().st_size
    monkeypatch.setenv("BUILDGEN_MAX_MODEL_BYTES", str(small + 1))
    with pytest.raises(BuildgenError) as caught:
        import_model(path, {})
    assert f"bytes with external data: {total:,} is more than" in caught.value.render()
    monkeypatch.setenv("BUILDGEN_MAX_MODEL_BYTES", str(total))
    import_model(path, {})


def test_an_onnx_file_of_two_gib_says_to_use_external_data(tmp_path: Path) -> None:
    path = tmp_path / "big.onnx"
    with path.open("wb") as sparse:  # no disk used: a hole
        sparse.truncate(2 * GIB)
    with pytest.raises(BuildgenError) as caught:
        import_model(path, {})
    message = caught.value.render()
    assert "an ONNX protobuf must be under 2 GiB" in message
    assert "save_as_external_data=True" in message


def test_a_limit_that_is_not_a_size_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = save(mlp(batch=1)[0], tmp_path)
    monkeypatch.setenv("BUILDGEN_MAX_NODES", "lots")
    with pytest.raises(BuildgenError, match=r"BUILDGEN_MAX_NODES=lots: size 'lots': expected"):
        import_model(path, {})


def test_real_models_are_far_below_the_defaults(tmp_path: Path) -> None:
    weights = np.zeros((1024, 1024), np.float32)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])],
                       [helper.make_tensor_value_info("x", F32, [64, 1024])],
                       [helper.make_tensor_value_info("y", F32, [64, 1024])], {"w": weights})
    import_model(save(model, tmp_path), {})


@pytest.mark.parametrize("location", ["/etc/hostname", "../secret.bin", "sub/../../secret.bin",
                                      "link/weights.bin"])
def test_external_data_outside_the_models_folder_is_refused(tmp_path: Path, location: str):
    """A model is data: it cannot make the build copy another file into a library."""
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.zeros(1024, np.float32).tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "link").symlink_to(tmp_path)  # a link out of the folder
    (tmp_path / "weights.bin").write_bytes(secret.read_bytes())
    model, _ = mlp(batch=1)
    weights = next(t for t in model.graph.initializer if t.name == "w1")
    weights.ClearField("float_data")
    weights.ClearField("raw_data")
    weights.data_location = onnx.TensorProto.EXTERNAL
    for key, value in {"location": location, "offset": "0", "length": "2048"}.items():
        weights.external_data.add(key=key, value=value)
    path = save(model, folder)
    with pytest.raises(BuildgenError, match="is outside the model's folder"):
        import_model(path, {})


def test_external_data_in_a_subfolder_is_fine(tmp_path: Path) -> None:
    model, _ = mlp(batch=1)
    (tmp_path / "data").mkdir()
    onnx.save(model, tmp_path / "model.onnx", save_as_external_data=True,
              location="data/weights.bin", size_threshold=0)
    import_model(tmp_path / "model.onnx", {})
