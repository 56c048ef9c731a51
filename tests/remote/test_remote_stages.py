"""A Python stage as a remote action: which files travel, the command and environment a
worker runs it with, the properties that choose the worker, and the stages that stay here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from buildgen import __version__
from buildgen.cache.action import ActionSpec, parse_exec_args
from buildgen.remote.action import PACKAGE_DIR, Layout, describe
from buildgen.remote.rules import LocalOnly, sent_remotely
from buildgen.remote.runtime import RUNTIME_PROPERTY, runtime_property
from buildgen.remote.settings import resolve_executor
from buildgen.remote.stages import package_files, stage_inputs
from buildgen.resources import rules_dir, schemas_dir

SECTION = {"executor": "grpc://127.0.0.1:50051", "platform": {"OSFamily": "linux"},
           "platforms": {"python": {"pool": "py"}, "c": {"pool": "cc"}}}
STAGES = [sys.executable, "-m", "buildgen.stages", "--buildgen-version", __version__]


def _model_with_external_data(folder: Path) -> Path:
    weight = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [weight])
    path = folder / "m.onnx"
    onnx.save(helper.make_model(graph), path, save_as_external_data=True,
              location="m.weights", size_threshold=0)
    return path


def _import_spec(source: str) -> ActionSpec:
    args = ["import", "--model", "m", "--source", source, "--graph", "m/graph.json",
            "--weights", "m/weights.bin", "--constants", "m/constants.bin",
            "--depfile", "m/graph.json.d"]
    return ActionSpec(rule="import", root="..", outputs=("m/graph.json", "m/weights.bin",
                                                          "m/constants.bin"),
                      inputs=(source,), command=(*STAGES, *args), depfile="m/graph.json.d",
                      restat=True)


def test_an_import_names_its_external_data_before_it_runs(tmp_path, monkeypatch) -> None:
    _model_with_external_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert stage_inputs(_import_spec("m.onnx").command[3:]) == ["m.onnx", "m.weights"]


def test_a_partition_with_a_users_step_stays_here() -> None:
    args = ["--buildgen-version", __version__, "partition", "--model", "m", "--target",
            "t.json", "--graph", "g.json", "--step", "mine:rewrite", "--out", "p.json"]
    with pytest.raises(LocalOnly, match="known only once it runs"):
        stage_inputs(args)
    plain = [a for a in args if a not in ("--step", "mine:rewrite")]
    assert stage_inputs(plain) == []


def test_the_stages_travel_only_when_asked() -> None:
    spec = _import_spec("m.onnx")
    settings = resolve_executor(SECTION, {})
    assert not sent_remotely(spec.rule, spec.command, settings)
    with_python = resolve_executor({**SECTION, "python": "python3"}, {})
    assert sent_remotely(spec.rule, spec.command, with_python)
    assert sent_remotely("cc", ("cc", "-c", "a.c"), settings)
    assert not sent_remotely("link_shared", ("cc", "-shared"), with_python)


def test_a_stage_runs_the_workers_python_on_the_buildgen_it_ships(tmp_path,
                                                                monkeypatch) -> None:
    project = tmp_path / "p"
    (project / "build").mkdir(parents=True)
    monkeypatch.chdir(project / "build")  # where ninja runs every action
    _model_with_external_data(project)
    settings = resolve_executor({**SECTION, "python": "python3"}, {})
    layout = Layout.of(str(project / "build"), "..")
    command, extra = describe(_import_spec("../m.onnx"), settings, layout,
                              {"PATH": "/usr/bin", "HOME": "/root"}, project / "build")
    assert list(command.arguments[:3]) == ["python3", "-m", "buildgen.stages"]
    env = {v.name: v.value for v in command.environment_variables}
    assert env == {"PATH": "/usr/bin", "PYTHONPATH": "../..", "PYTHONDONTWRITEBYTECODE": "1",
                   "PYTHONNOUSERSITE": "1"}
    # from the working directory (src/build), ../.. is the input root, which holds buildgen/
    assert layout.place(os.path.join(PACKAGE_DIR, "stages", "runner.py")) == \
        "buildgen/stages/runner.py"
    assert {p.name: p.value for p in command.platform.properties} == {
        "OSFamily": "linux", "pool": "py", RUNTIME_PROPERTY: runtime_property()}
    assert "../m.weights" in extra
    assert set(package_files()) <= set(extra)


def test_buildgen_ships_whole_and_without_bytecode(tmp_path) -> None:
    files = package_files()
    assert os.path.join(PACKAGE_DIR, "stages", "runner.py") in files
    assert os.path.join(PACKAGE_DIR, "include", "bg_gemm.h") in files
    assert str(rules_dir() / "c.yaml") in files
    assert str(schemas_dir() / "manifest.schema.json") in files
    assert not [f for f in files if f.endswith(".pyc") or "__pycache__" in f]
    layout = Layout.of(str(tmp_path / "build"), "..")
    # rules/ and schemas/ sit beside the package, where buildgen.resources looks for them
    beside = os.path.dirname(layout.place(os.path.join(PACKAGE_DIR, "x")) or "")
    assert layout.place(str(rules_dir() / "c.yaml")) == f"{os.path.dirname(beside)}/" \
        f"{os.path.relpath(rules_dir() / 'c.yaml', Path(PACKAGE_DIR).parent)}".lstrip("/")


def test_a_compile_asks_for_its_kinds_properties(tmp_path, monkeypatch) -> None:
    spec = parse_exec_args(["--rule", "cc", "--root", "..", "--depfile", "a.o.d",
                            "--kind=c", "--out", "a.o", "--in", "a.c", "--",
                            "cc", "-MD", "-MF", "a.o.d", "-c", "a.c", "-o", "a.o"])
    assert spec.kind == "c"
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "a.c").write_text("int a;\n")
    monkeypatch.chdir(tmp_path / "build")
    settings = resolve_executor(SECTION, {})
    command, headers = describe(spec, settings, Layout.of(str(tmp_path / "build"), ".."),
                                dict(os.environ), tmp_path / "build")
    assert {p.name: p.value for p in command.platform.properties} == {
        "OSFamily": "linux", "pool": "cc"}
    assert headers[0] == "a.c"
    assert parse_exec_args(["--rule", "cc", "--root", "..", "--kind=", "--out", "a.o",
                            "--", "cc"]).kind == ""
