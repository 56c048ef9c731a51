"""The "inputs with dynamic dims" error prints the YAML to paste into the model's entry: the
lines `buildgen init` writes (one function makes both), and pasting them makes it import."""

from __future__ import annotations

import textwrap
from pathlib import Path

import onnx
import pytest
import yaml
from onnx import TensorProto, helper

from buildgen.errors import BuildgenError
from buildgen.importer import import_model
from buildgen.manifest.init import init_model


def _model(path: Path) -> Path:
    inputs = [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, ["batch", "seq"]),
              helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", 4])]
    outputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", "seq"]),
               helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 4])]
    nodes = [helper.make_node("Relu", ["tokens"], ["a"], name="r0"),
             helper.make_node("Relu", ["mask"], ["b"], name="r1")]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _hint(call) -> list[str]:
    with pytest.raises(BuildgenError) as info:
        call()
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.hint is not None
    return diagnostic.hint.splitlines()


def test_the_error_prints_the_lines_init_writes(tmp_path: Path) -> None:
    path = _model(tmp_path / "bert.onnx")
    hint = _hint(lambda: import_model(path, {}, model_name="bert"))
    assert hint == [
        "set it under models.bert.inputs; add to models.bert in the manifest:",
        "    inputs:",
        "      tokens: [1, <seq>]  # [batch, seq]: batch = 1 (a batch size); fill in <seq>",
        "      mask: [1, 4]  # [batch, 4]: batch = 1 (a batch size)",
    ]
    init_model(path, tmp_path / "BUILD.yaml")
    written = (tmp_path / "BUILD.yaml").read_text().splitlines()
    assert hint[1:] == written[6:9]  # the same indentation as a manifest's model keys
    # Pasted, with the placeholder filled in, it imports.
    block = yaml.safe_load(textwrap.dedent("\n".join(hint[1:]).replace("<seq>", "5")))
    graph = import_model(path, block["inputs"], model_name="bert").graph
    assert [v.type.shape for v in graph.inputs] == [(1, 5), (1, 4)]


def test_with_some_inputs_set_it_prints_only_the_entries_to_add(tmp_path: Path) -> None:
    path = _model(tmp_path / "bert.onnx")
    hint = _hint(lambda: import_model(path, {"mask": [2, 4]}, model_name="bert"))
    assert hint == [
        "set it under models.bert.inputs; add to it in the manifest:",
        "      tokens: [1, <seq>]  # [batch, seq]: batch = 1 (a batch size); fill in <seq>",
    ]
