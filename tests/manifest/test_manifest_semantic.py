"""Checks beyond the schema: names, target references, model files, unsafe characters."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from buildgen.errors import BuildgenError
from buildgen.manifest import load_manifest
from buildgen.manifest.semantic import model_name_problem, target_name_problem


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("mlp", None),
        ("_mlp2", None),
        ("resnet_50", None),
        ("3mlp", "model name '3mlp' is not a C identifier"),
        ("my-model", "model name 'my-model' is not a C identifier"),
        ("int", "model name 'int' is a C keyword"),
        ("bool", "model name 'bool' is a C keyword"),
        ("bg_mlp", "model name 'bg_mlp' starts with 'bg_', which buildgen reserves"),
        ("__mlp", "model name '__mlp' is reserved by the C standard"),
        ("_Mlp", "model name '_Mlp' is reserved by the C standard"),
        ("_targets", "model name '_targets' is the name of a folder buildgen keeps in the "
                     "build dir"),
    ],
)
def test_model_names(name: str, problem: str | None) -> None:
    assert model_name_problem(name) == problem


def test_the_build_dirs_own_folders_are_reserved_model_names() -> None:
    from buildgen.manifest.semantic import RESERVED_MODEL_NAMES
    from buildgen.ninja.layout import BUILD_FOLDERS

    assert set(RESERVED_MODEL_NAMES) == set(BUILD_FOLDERS)


@pytest.mark.parametrize(
    ("name", "ok"),
    [("cpu", True), ("fast-cpu", True), ("gpu_90", True), ("9gpu", False), ("-x", False),
     ("a b", False), ("a/b", False), ("a|b", False), ("a$b", False), ("a.b", False)],
)
def test_target_names(name: str, ok: bool) -> None:
    assert (target_name_problem(name) is None) == ok


def test_names_are_reported_at_their_keys(write_manifest, errors_of) -> None:
    path = write_manifest(
        """
        buildgen: 1
        targets:
          my cpu: c
        models:
          3mlp: {source: mlp.onnx, targets: [c]}
          bg_net: {source: mlp.onnx, targets: [c]}
        """
    )
    assert errors_of(path, lambda name: name == "c") == [
        "3:3: targets: invalid target name 'my cpu'",
        "5:3: models: model name '3mlp' is not a C identifier",
        "6:3: models: model name 'bg_net' starts with 'bg_', which buildgen reserves",
    ]


def test_unknown_target_with_hint_and_known_targets_callback(write_manifest) -> None:
    path = write_manifest(
        """
        buildgen: 1
        targets: {fast-cpu: {tag: x86-onednn}}
        models:
          mlp: {source: mlp.onnx, targets: [fast-cpu, fastcpu, x86-onednn, fast-cpu]}
        """
    )
    with pytest.raises(BuildgenError) as caught:
        load_manifest(path)  # by default no registered kind or tag is known
    found = [(d.location.column if d.location else 0, d.message, d.hint)
             for d in caught.value.diagnostics]
    assert found == [
        (47, "models.mlp.targets[1]: unknown target 'fastcpu'", "did you mean 'fast-cpu'?"),
        (56, "models.mlp.targets[2]: unknown target 'x86-onednn'",
         "define it under 'targets:' or use a registered target kind or tag"),
        (68, "models.mlp.targets[3]: target 'fast-cpu' is listed twice", None),
    ]
    with pytest.raises(BuildgenError) as caught:
        load_manifest(path, lambda name: name == "x86-onednn")
    assert len(caught.value.diagnostics) == 2


def test_missing_source_names_the_resolved_path(write_manifest, errors_of, tmp_path) -> None:
    path = write_manifest(
        "buildgen: 1\nmodels:\n  mlp: {source: models/../nope.onnx, targets: [c]}\n"
    )
    assert errors_of(path, lambda name: True) == [
        f"3:17: models.mlp.source: file not found: {tmp_path / 'nope.onnx'}"
    ]
    path = write_manifest('buildgen: 1\nmodels:\n  mlp: {source: "x\\0y", targets: [c]}\n')
    assert errors_of(path, lambda name: True) == [  # a NUL, which no file name holds
        f"3:17: models.mlp.source: file not found: {tmp_path / 'x'}\0y"
    ]
    (tmp_path / "dir.onnx").mkdir()
    path = write_manifest("buildgen: 1\nmodels:\n  mlp: {source: dir.onnx, targets: [c]}\n")
    assert errors_of(path, lambda name: True) == [
        f"3:17: models.mlp.source: not a file: {tmp_path / 'dir.onnx'}"
    ]


def test_a_missing_partition_file_is_located_and_missing_records_are_not_an_error(
    write_manifest, errors_of, tmp_path
) -> None:
    """The partition file is the user's own; tuning records may be named before `buildgen
    tune` writes them."""
    (tmp_path / "m.onnx").write_bytes(b"")
    path = write_manifest(
        "buildgen: 1\npartition: {file: top.json}\nmodels:\n"
        "  mlp: {source: m.onnx, targets: [c], partition: {file: p.json, records: r.json}}\n"
    )
    assert errors_of(path, lambda name: True) == [
        f"2:19: partition.file: file not found: {tmp_path / 'top.json'}",
        f"4:57: models.mlp.partition.file: file not found: {tmp_path / 'p.json'}",
    ]


def test_relative_paths_start_at_the_manifest_folder(tmp_path: Path, monkeypatch) -> None:
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "models" / "mlp.onnx").write_bytes(b"")
    (project / "BUILD.yaml").write_text(
        "buildgen: 1\nbuild_dir: out\nmodels:\n  mlp: {source: models/mlp.onnx, targets: [c]}\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    manifest = load_manifest(os.path.join("..", "project", "BUILD.yaml"), lambda name: True)
    assert manifest.path == project / "BUILD.yaml"
    assert manifest.root == project
    assert manifest.build_dir == project / "out"
    assert manifest.models[0].source == project / "models" / "mlp.onnx"
    # Messages name the manifest the way the user did.
    (project / "BUILD.yaml").write_text("buildgen: 3\n")
    with pytest.raises(BuildgenError) as caught:
        load_manifest(os.path.join("..", "project", "BUILD.yaml"))
    assert str(caught.value).startswith("../project/BUILD.yaml:1:11: error: buildgen: expected 1")


def test_absolute_source_is_kept(write_manifest, tmp_path) -> None:
    model = tmp_path / "abs" / "net.onnx"
    model.parent.mkdir()
    model.write_bytes(b"")
    path = write_manifest(f"buildgen: 1\nmodels:\n  net: {{source: '{model}', targets: [c]}}\n")
    assert load_manifest(path, lambda name: True).models[0].source == model


def test_unsafe_characters(write_manifest, errors_of) -> None:
    path = write_manifest(
        """
        buildgen: 1
        build_dir: "out|x"
        partition: {records: "rec$.json"}
        models:
          mlp:
            source: "a\\nb.onnx"
            inputs: {"in|put": [1], "": [2]}
            targets: [c]
        """
    )
    assert errors_of(path, lambda name: True) == [
        "2:12: build_dir: a path cannot contain '|' (build files cannot carry it)",
        "3:22: partition.records: a path cannot contain '$' (build files cannot carry it)",
        "6:13: models.mlp.source: a path cannot contain a newline (build files cannot carry it)",
        "7:14: models.mlp.inputs: input name 'in|put' contains '|'",
        "7:29: models.mlp.inputs: an input name cannot be empty",
    ]


def test_model_names_equal_up_to_case_are_refused(tmp_path: Path) -> None:
    (tmp_path / "m.onnx").write_bytes(b"")
    (tmp_path / "BUILD.yaml").write_text(
        "buildgen: 1\nmodels:\n  mlp: {source: m.onnx, targets: [c]}\n"
        "  MLP: {source: m.onnx, targets: [c]}\n")
    with pytest.raises(BuildgenError) as caught:
        load_manifest(tmp_path / "BUILD.yaml", lambda name: name == "c")
    (diagnostic,) = caught.value.diagnostics
    assert "'MLP' differs from 'mlp' only in case" in diagnostic.message
    assert diagnostic.location is not None and diagnostic.location.line == 4


def test_names_longer_than_a_file_name_are_refused() -> None:
    assert "300 characters long" in (model_name_problem("m" * 300) or "")
    assert "300 characters long" in (target_name_problem("t" * 300) or "")
