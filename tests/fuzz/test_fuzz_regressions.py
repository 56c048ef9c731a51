"""The cases the fuzz tests found, each reduced to a quick test (not marked slow): every one
ended in an internal error before its fix and must end in a clean error now."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from buildgen.errors import BuildgenError

ROOT = Path(__file__).resolve().parents[2]


def _gen(tmp_path: Path, text: str) -> str:
    from buildgen.cli import main

    project = tmp_path / "proj"
    project.mkdir()
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="r")], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              project / "m.onnx")
    (project / "BUILD.yaml").write_text(text, encoding="utf-8")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(["gen", "--manifest", str(project / "BUILD.yaml")])
    assert status == 1
    assert "internal error" not in err.getvalue()
    return err.getvalue()


def test_escaped_surrogate_in_manifest(tmp_path: Path) -> None:
    # libyaml refuses "\ud800\udc00"; the pure-Python parser accepted it (AssertionError).
    text = ('{"buildgen": 1, "models": {"m": {"source": "m.onnx", '
            '"targets": ["\\ud800\\udc00"]}}}\n')
    assert "invalid YAML: found invalid Unicode character escape code" in _gen(tmp_path, text)


def test_source_name_too_long(tmp_path: Path) -> None:
    # os.stat raised ENAMETOOLONG out of the manifest's path check.
    text = f"buildgen: 1\nmodels:\n  m:\n    source: {'a' * 300}\n    targets: [c]\n"
    assert "models.m.source: cannot read" in _gen(tmp_path, text)


def _import(tmp_path: Path, model: onnx.ModelProto | bytes,
            shapes: dict[str, list[int]] | None = None) -> str:
    from buildgen.importer import import_model

    path = tmp_path / "model.onnx"
    path.write_bytes(model if isinstance(model, bytes) else model.SerializeToString())
    with pytest.raises(BuildgenError) as caught:
        import_model(path, shapes or {}, model_name="m")
    return caught.value.render()


def _matmul() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="NAMEX")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(np.ones((5, 4), np.float32), "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_initializer_data_not_matching_dims(tmp_path: Path) -> None:
    model = _matmul()
    model.graph.initializer[0].raw_data = b""  # numpy_helper.to_array: ValueError
    assert "initializer 'w' is malformed" in _import(tmp_path, model)


def test_name_not_utf8(tmp_path: Path) -> None:
    # proto2 string fields are not checked for UTF-8: the name came back as bytes.
    raw = _matmul().SerializeToString().replace(b"NAMEX", b"NAM\xff\xfe")
    assert "not a valid ONNX model: a name field holds" in _import(tmp_path, raw)


def test_graph_input_with_empty_name(tmp_path: Path) -> None:
    model = _matmul()
    model.graph.input.append(helper.make_tensor_value_info("", TensorProto.FLOAT, [3]))
    assert "a graph input has an empty name" in _import(tmp_path, model)


def test_opset_version_beyond_c_int(tmp_path: Path) -> None:
    # defs.get_schema(op, 2**40, domain) raised TypeError in the node-by-node inference.
    model = onnx.load(ROOT / "examples/models/cnn.onnx")
    model.opset_import.append(helper.make_opsetid("com.microsoft", 2**40))
    for node in model.graph.node:
        node.domain = "com.microsoft"
    from buildgen.importer import import_model

    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    with contextlib.suppress(BuildgenError):
        import_model(path, {"image": [1, 3, 32, 32]}, model_name="m")


def test_graph_input_also_written_by_a_node(tmp_path: Path) -> None:
    # The IR verifier's "tensor name 'y' is declared twice" (an internal error) before.
    model = _matmul()
    model.graph.input.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4]))
    assert "tensor 'y' is a graph input or initializer, and node" in _import(tmp_path, model)


@pytest.mark.parametrize("version", [0, -1])
def test_default_opset_below_one(tmp_path: Path, version: int) -> None:
    # The IR verifier's "opset 0 is not a valid ONNX opset" (an internal error) before.
    model = _matmul()
    model.opset_import[0].version = version
    assert f"declares opset {version} of the default domain, which is no" in _import(
        tmp_path, model)


def test_attribute_given_twice(tmp_path: Path) -> None:
    # The IR verifier's "has attributes ['axis', 'axis'], not sorted and unique" before.
    graph = helper.make_graph(
        [helper.make_node("Concat", ["x", "x"], ["y"], name="cat", axis=0)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.graph.node[0].attribute.append(helper.make_attribute("axis", 0))
    assert "node 'cat' (Concat) has attribute 'axis' more than once" in _import(tmp_path, model)


def test_escape_past_unicode_in_manifest(tmp_path: Path) -> None:
    # libyaml refuses it; the pure-Python parser asked for its message raised ValueError.
    text = 'buildgen: 1\nbuild_dir: "\\U20099C76"\n'
    assert "invalid YAML: found invalid Unicode character escape code" in _gen(tmp_path, text)


def test_build_dir_with_nul(tmp_path: Path) -> None:
    # os.path.realpath raised "ValueError: embedded null byte" out of checked_build_dir.
    text = ('buildgen: 1\nbuild_dir: "x\\0y"\nmodels:\n  m: {source: m.onnx, '
            'targets: [c]}\n')
    assert "holds a NUL character" in _gen(tmp_path, text)
