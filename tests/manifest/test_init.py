"""`buildgen init`: a new manifest or an entry appended to one, as text; placeholders for the
dims it cannot guess; the result always loads (placeholders aside) or nothing is written."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from buildgen.cli import main
from buildgen.errors import BuildgenError
from buildgen.manifest import init as init_module
from buildgen.manifest import load_manifest
from buildgen.manifest.init import init_model, suggest_name
from buildgen.targets import is_known_target

REPO = Path(__file__).resolve().parents[2]

Dims = list[int | str | None]


def relu_model(path: Path, inputs: dict[str, Dims] | None = None) -> Path:
    """y_i = Relu(x_i) for each input; dims: int fixed, str dim_param, None no value."""
    inputs = inputs or {"x": ["batch", 4]}
    values, outputs, nodes = [], [], []
    for index, (name, dims) in enumerate(inputs.items()):
        value = helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)
        values.append(value)
        outputs.append(helper.make_tensor_value_info(f"y{index}", TensorProto.FLOAT, dims))
        nodes.append(helper.make_node("Relu", [name], [f"y{index}"], name=f"relu{index}"))
    graph = helper.make_graph(nodes, "g", values, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


@pytest.fixture(autouse=True)
def _portable_default_target(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default target depends on the libraries installed; the texts below use `c`."""
    monkeypatch.setattr(init_module, "machine_target", lambda: "{kind: c}")


def test_a_new_manifest_is_complete_and_loads(tmp_path: Path) -> None:
    relu_model(tmp_path / "models" / "net.onnx", {"x": [2, 4]})
    manifest = tmp_path / "BUILD.yaml"
    result = init_model(tmp_path / "models" / "net.onnx", manifest)
    assert result.created and result.name == "net" and not result.placeholders
    assert manifest.read_text() == textwrap.dedent("""\
        buildgen: 1
        targets:
          cpu: {kind: c}
        models:
          net:
            source: models/net.onnx
            targets: [cpu]
        """)
    loaded = load_manifest(manifest, is_known_target)
    assert [(m.name, m.targets) for m in loaded.models] == [("net", ("cpu",))]


def test_the_machine_target_names_only_installed_libraries(monkeypatch) -> None:
    monkeypatch.undo()
    from buildgen.backends import libraries

    text = init_module.machine_target()
    for kind, find in (("onednn", libraries.pip_onednn_prefix),
                       ("openblas", libraries.scipy_openblas_prefix)):
        try:
            find()
            installed = True
        except BuildgenError:
            installed = False
        assert (f"{{kind: {kind}}}" in text) == installed
    assert "{kind: c}" in text


def test_dynamic_dims_batch_is_one_others_are_placeholders(tmp_path: Path) -> None:
    model = relu_model(tmp_path / "m.onnx", {
        "tokens": ["batch_size", "seq"],
        "image": ["N", 3, None, -1],
        "empty": [0, 4],  # a fixed empty dim: static, as the importer reads it
        "fixed": [2, 3],
    })
    manifest = tmp_path / "BUILD.yaml"
    result = init_model(model, manifest)
    lines = manifest.read_text().splitlines()
    assert lines[5:10] == [
        "    source: m.onnx",
        "    inputs:",
        "      tokens: [1, <seq>]  # [batch_size, seq]: batch_size = 1 (a batch size); "
        "fill in <seq>",
        "      image: [1, 3, <dim2>, <dim3>]  # [N, 3, ?, ?]: N = 1 (a batch size); "
        "fill in <dim2>, <dim3>",
        "    targets: [cpu]",
    ]
    assert result.placeholders == ((8, "<seq>"), (9, "<dim2>"), (9, "<dim3>"))
    # The placeholders fail validation where they stand, the comment under the caret.
    with pytest.raises(BuildgenError) as info:
        load_manifest(manifest, is_known_target)
    text = info.value.render()
    assert "BUILD.yaml:8:19: error: models.m.inputs.tokens[1]: expected a positive integer, " \
           "got '<seq>'" in text
    assert "fill in <seq>" in text.splitlines()[1]
    assert "BUILD.yaml:9:21: error: models.m.inputs.image[2]" in text


def test_only_batch_dims_build_at_once(tmp_path: Path) -> None:
    model = relu_model(tmp_path / "m.onnx", {"x": ["batch", 8]})
    result = init_model(model, tmp_path / "BUILD.yaml")
    assert not result.placeholders
    spec = load_manifest(tmp_path / "BUILD.yaml", is_known_target).models[0]
    assert dict(spec.inputs) == {"x": (1, 8)}


APPENDED_TO = """\
# Our models. Keep them sorted.
buildgen: 1
targets:
    fast:                 # the one we ship
        kind: c
        opt_level: 3
models:
    # the first one
    first:
        source: first.onnx
        targets: [fast]   # fast only

# what follows is not a model
build_dir: out
"""


def test_an_entry_is_appended_as_text_keeping_comments_and_indentation(tmp_path: Path) -> None:
    relu_model(tmp_path / "first.onnx", {"x": [1, 4]})
    relu_model(tmp_path / "nets" / "second net.onnx", {"x": ["n", "len"]})
    manifest = tmp_path / "BUILD.yaml"
    manifest.write_text(APPENDED_TO)
    result = init_model(tmp_path / "nets" / "second net.onnx", manifest)
    assert result.name == "second_net" and not result.created
    expected = APPENDED_TO.replace("# fast only\n", "# fast only\n" + textwrap.indent(
        textwrap.dedent("""\
        second_net:
            source: "nets/second net.onnx"
            inputs:
                x: [1, <len>]  # [n, len]: n = 1 (a batch size); fill in <len>
            targets: [fast]
        """), "    "))
    assert manifest.read_text() == expected
    assert result.placeholders == ((15, "<len>"),)


def test_a_manifest_without_models_gets_the_key(tmp_path: Path) -> None:
    relu_model(tmp_path / "a.onnx", {"x": [1, 4]})
    manifest = tmp_path / "BUILD.yaml"
    manifest.write_text("buildgen: 1  # hi\ntargets: {cpu: {kind: c}}")  # no final newline
    init_model(tmp_path / "a.onnx", manifest)
    assert manifest.read_text() == (
        "buildgen: 1  # hi\ntargets: {cpu: {kind: c}}\n"
        "models:\n  a:\n    source: a.onnx\n    targets: [cpu]\n"
    )
    # `models: {}` becomes a block; CRLF line breaks stay CRLF; no targets: one is added.
    manifest.write_bytes(b"buildgen: 1\r\nmodels: {}  # none yet\r\n")
    init_model(tmp_path / "a.onnx", manifest)
    assert manifest.read_bytes() == (
        b"buildgen: 1\r\nmodels:  # none yet\r\n  a:\r\n    source: a.onnx\r\n"
        b"    targets: [cpu]\r\ntargets:\r\n  cpu: {kind: c}\r\n"
    )
    load_manifest(manifest, is_known_target)


def test_the_target_the_other_models_use_or_the_one_given(tmp_path: Path) -> None:
    for name in ("a", "b", "c2", "d"):
        relu_model(tmp_path / f"{name}.onnx", {"x": [1, 4]})
    manifest = tmp_path / "BUILD.yaml"
    manifest.write_text(textwrap.dedent("""\
        buildgen: 1
        targets: {one: {kind: c}, two: {kind: c, opt_level: 1}}
        models:
          a: {source: a.onnx, targets: [two, one]}
          b: {source: b.onnx, targets: [two, one]}
        """))
    init_model(tmp_path / "c2.onnx", manifest)
    init_model(tmp_path / "d.onnx", manifest, target="x86-v3")  # a registered tag
    spec = {m.name: m.targets for m in load_manifest(manifest, is_known_target).models}
    assert spec["c2"] == ("two", "one") and spec["d"] == ("x86-v3",)
    before = manifest.read_text()
    with pytest.raises(BuildgenError, match="--target tow: no target of that name") as info:
        init_model(tmp_path / "d.onnx", manifest, name="e", target="tow")
    assert "did you mean 'two'?" in info.value.render()
    assert manifest.read_text() == before


def test_a_name_the_manifest_has_is_refused(tmp_path: Path) -> None:
    relu_model(tmp_path / "mlp.onnx", {"x": [1, 4]})
    manifest = tmp_path / "BUILD.yaml"
    init_model(tmp_path / "mlp.onnx", manifest)
    before = manifest.read_text()
    for name in (None, "MLP"):
        with pytest.raises(BuildgenError) as info:
            init_model(tmp_path / "mlp.onnx", manifest, name=name)
        text = info.value.render()
        assert text.startswith(f"{manifest}:5:3: error: models.mlp: {manifest} already has")
        assert "--name" in text
    assert manifest.read_text() == before
    assert init_model(tmp_path / "mlp.onnx", manifest, name="mlp_2").name == "mlp_2"


def test_names_are_made_valid_or_refused(tmp_path: Path) -> None:
    assert suggest_name("2-layer net") == "model_2_layer_net"
    assert suggest_name("int") == "int_model"
    assert suggest_name("bg_x") == "model_bg_x"
    assert suggest_name("__x__") == "x"
    relu_model(tmp_path / "m.onnx", {"x": [1, 4]})
    with pytest.raises(BuildgenError, match="is not a C identifier") as info:
        init_model(tmp_path / "m.onnx", tmp_path / "BUILD.yaml", name="my-net")
    assert "try --name my_net" in info.value.render()
    assert not (tmp_path / "BUILD.yaml").exists()


def test_a_manifest_that_would_not_load_is_left_as_it_was(tmp_path: Path) -> None:
    relu_model(tmp_path / "m.onnx", {"x": [1, 4]})
    manifest = tmp_path / "BUILD.yaml"
    broken = "buildgen: 1\nmodels:\n  old:\n    sorce: old.onnx\n    targets: [c]\n"
    manifest.write_text(broken)
    with pytest.raises(BuildgenError) as info:
        init_model(tmp_path / "m.onnx", manifest)
    text = info.value.render()
    assert "not written" in text and f"{manifest}:4:5: error: models.old: unknown key" in text
    assert ".buildgen-init-" not in text
    assert manifest.read_text() == broken
    assert sorted(p.name for p in tmp_path.iterdir()) == ["BUILD.yaml", "m.onnx"]


def test_a_flow_style_models_mapping_gets_the_entry_to_paste(tmp_path: Path) -> None:
    relu_model(tmp_path / "m.onnx", {"x": ["batch", 4]})
    manifest = tmp_path / "BUILD.yaml"
    manifest.write_text("buildgen: 1\nmodels: {a: {source: m.onnx, targets: [c]}}\n")
    with pytest.raises(BuildgenError) as info:
        init_model(tmp_path / "m.onnx", manifest, name="b")
    assert info.value.render().endswith(
        "  b:\n    source: m.onnx\n    inputs:\n"
        "      x: [1, 4]  # [batch, 4]: batch = 1 (a batch size)\n    targets: [c]")


def test_not_a_model(tmp_path: Path) -> None:
    (tmp_path / "junk.onnx").write_bytes(b"\xff\x00garbage")
    with pytest.raises(BuildgenError, match="not an ONNX model"):
        init_model(tmp_path / "junk.onnx", tmp_path / "BUILD.yaml")
    with pytest.raises(BuildgenError, match="model not found"):
        init_model(tmp_path / "none.onnx", tmp_path / "BUILD.yaml")


def test_the_command_prints_what_it_wrote_and_the_next_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = relu_model(tmp_path / "m.onnx", {"x": ["batch", "seq"]})
    manifest = tmp_path / "sub" / "BUILD.yaml"
    assert main(["init", str(model), "--manifest", str(manifest)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {manifest}:\nbuildgen: 1\n")
    assert f"fill in the sizes buildgen cannot guess: <seq> ({manifest}:8)" in out
    assert out.endswith(f"then: buildgen build --manifest {manifest} m\n")
    assert "source: ../m.onnx" in manifest.read_text()
    assert main(["init", str(model), "--manifest", str(manifest)]) == 1
    assert "already has a model named 'm'" in capsys.readouterr().err


def test_init_then_build_then_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole path a user takes: init a model with a batch dim, build it, call it."""
    import buildgen.runtime

    monkeypatch.undo()  # the default target for this machine, as a user gets it
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    monkeypatch.chdir(tmp_path)
    relu_model(tmp_path / "tiny.onnx", {"x": ["batch", 8]})
    assert main(["init", "tiny.onnx"]) == 0
    assert capsys.readouterr().out.endswith("next: buildgen build tiny\n")
    assert main(["build", "tiny"]) == 0, capsys.readouterr().err
    library = next((tmp_path / "build" / "tiny").glob("*/libtiny.so"))
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)
    (y,) = buildgen.runtime.load(str(library))(x)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
