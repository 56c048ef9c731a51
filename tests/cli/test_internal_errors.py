"""No tracebacks: a bug in a stage or a command ends as one located paragraph (model file,
stage, node and op where known) and a crash report in the build dir holding the traceback;
an op no backend runs is named with the attributes that made the backends decline it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from cli_helpers import REPO
from onnx import TensorProto, helper, numpy_helper

from buildgen import __version__
from buildgen.cli import main
from buildgen.crash import CRASH_DIR
from buildgen.ir import Node
from buildgen.stages import runner


def _one_paragraph(err: str) -> list[str]:
    """The error line and its hint, and nothing else (no traceback)."""
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("error: ")
    assert lines[1].startswith("  hint: this is a bug in buildgen; the traceback is in ")
    return lines


def _report(hint: str) -> Path:
    path = Path(hint.split("the traceback is in ", 1)[1].split(": please", 1)[0])
    assert path.is_file()
    return path


class _CrashingStage:
    """A stage module whose run() dies of a bug while it holds a node."""

    __name__ = "buildgen.stages.codegen_stage"

    def add_arguments(self, parser: object) -> None:
        pass

    def outputs(self, args: object) -> list[str]:
        return ["m/c/src/c.c"]

    def run(self, args: object) -> dict[str, str]:
        node = Node("/block/Add", "Add", ("p", "q"), ("y",))
        return {node.name: {}["q"]}


def test_a_bug_in_a_stage_is_one_paragraph_and_a_crash_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "graph.json").write_text('{"format": "buildgen-graph", '
                                               '"source": "../models/m.onnx"}')
    stale = tmp_path / "m" / "c" / "src" / "c.c"
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    import argparse

    args = argparse.Namespace(model="m", backend="c", graph="m/graph.json")
    assert runner.run_stage(_CrashingStage(), args) == 1  # type: ignore[arg-type]
    assert not stale.exists()  # a failed action leaves no stale output
    head, hint = _one_paragraph(capsys.readouterr().err)
    assert head == (
        "error: ../models/m.onnx: internal error in the codegen stage (model 'm', backend 'c') "
        "at node '/block/Add' (Add): KeyError: 'q'"
    )
    report = _report(hint)
    assert report == tmp_path / CRASH_DIR / "codegen-m_c_src_c.c.txt"
    text = report.read_text()
    assert text.startswith(f"buildgen {__version__} crash report\n")
    assert "Traceback (most recent call last)" in text and "KeyError: 'q'" in text


def test_an_ir_verification_failure_in_the_import_stage_names_the_model(
    tiny_onnx: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An importer bug that verify_graph catches (here: a planted negative dim) ends as a
    located paragraph, not an IRVerificationError traceback."""
    from dataclasses import replace

    from buildgen.importer import api
    from buildgen.ir import TensorType

    real = api.build_graph

    def corrupting(spec: object) -> tuple[object, bytes]:
        graph, blob = real(spec)  # type: ignore[arg-type]
        values = tuple(replace(v, type=TensorType(v.type.dtype, (-1, *v.type.shape[1:])))
                       if v.name == "h" else v for v in graph.values)
        return replace(graph, values=values), blob

    monkeypatch.setattr(api, "build_graph", corrupting)
    monkeypatch.chdir(tiny_onnx.parent)
    argv = ["--buildgen-version", __version__, "import", "--model", "tiny", "--source",
            tiny_onnx.name, "--input", "x=2,4", "--graph", "out/graph.json", "--weights",
            "out/weights.bin", "--constants", "out/constants.bin", "--depfile",
            "out/graph.json.d"]
    assert runner.main(argv) == 1
    head, hint = _one_paragraph(capsys.readouterr().err)
    assert head.startswith("error: tiny.onnx: internal error in the import stage (model 'tiny'): "
                           "IRVerificationError: graph 'tiny' fails verification: - tensor 'h' "
                           "has shape (-1, 3)")
    assert "IRVerificationError" in _report(hint).read_text()
    assert not (tiny_onnx.parent / "out" / "graph.json").exists()


def _build(folder: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "buildgen", "build", "--manifest",
               str(folder / "BUILD.yaml"), "--build-dir", str(folder / "build")]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)


def _manifest(folder: Path, model: onnx.ModelProto, inputs: dict[str, list[int]]) -> None:
    onnx.save(model, folder / "m.onnx")
    doc = {"buildgen": 1, "models": {"m": {"source": "m.onnx", "inputs": inputs,
                                           "targets": ["c"]}}}
    (folder / "BUILD.yaml").write_text(yaml.safe_dump(doc))


def test_a_bug_in_a_backend_names_the_model_and_the_node(
    tiny_onnx: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The codegen action of a real build, run again in-process with a bug planted in the
    c backend's fusion (where a node is at hand)."""
    folder = tiny_onnx.parent
    _manifest(folder, onnx.load(tiny_onnx), {"x": [2, 4]})
    done = _build(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    build = folder / "build"
    ninja = (build / "build.ninja").read_text()
    edge = re.split(r"build m/c/src/c\.c[^:\n]*: codegen", ninja, maxsplit=1)[1]
    args = shlex.split(edge.split("  args = ", 1)[1].splitlines()[0])

    def broken(ctx: object, node: Node) -> None:
        raise IndexError("tuple index out of range")

    monkeypatch.setattr("buildgen.backends.c.fusion.activation_of", broken)
    monkeypatch.chdir(build)
    assert runner.main(["--buildgen-version", __version__, "codegen", *args]) == 1
    head, hint = _one_paragraph(capsys.readouterr().err)
    assert head == (
        "error: ../m.onnx: internal error in the codegen stage (model 'm', backend 'c') "
        "at node 'relu' (Relu): IndexError: tuple index out of range"
    )
    assert "broken" in _report(hint).read_text()  # the planted bug is in the traceback
    assert not (build / "m" / "c" / "src" / "c.c").exists()


def test_a_bug_in_a_command_is_reported_the_same_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(args: object) -> int:
        node = Node("n", "Softmax", ("x",), ("y",))
        raise AttributeError(f"{node.op} has no attribute 'axis'")

    monkeypatch.setattr("buildgen.ninja.cli_gen.run", broken)
    manifest = tmp_path / "BUILD.yaml"
    manifest.write_text("buildgen: 1\nmodels: {}\n")
    build = tmp_path / "out"
    assert main(["gen", "--manifest", str(manifest), "--build-dir", str(build)]) == 1
    head, hint = _one_paragraph(capsys.readouterr().err)
    assert head == ("error: internal error in `buildgen gen` at node 'n' (Softmax): "
                    "AttributeError: Softmax has no attribute 'axis'")
    assert _report(hint) == build / CRASH_DIR / "buildgen-gen.txt"


def test_an_op_no_backend_runs_is_named_with_its_attributes(tmp_path: Path) -> None:
    """Through `buildgen build`: the import is fine, the partition says why each backend
    declines the node, attributes included, in one line. (A mode no Resize has: the c
    backend runs every mode the spec lists.)"""
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up", mode="bicubic")],
            "resize",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [scales],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    _manifest(tmp_path, model, {})
    done = _build(tmp_path)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert errors[0].startswith("error: ../m.onnx: node 'up' (op Resize) is not supported by any")
    assert "Resize mode=bicubic not supported" in errors[0]


def test_codegen_errors_name_the_model_file() -> None:
    """A backend's error names a node; the codegen stage puts the model file in front."""
    from buildgen.errors import BuildgenError, Diagnostic, SourceLocation, in_file

    err = BuildgenError([
        Diagnostic("c backend cannot run node 'n' of region r0: op TopK not implemented"),
        Diagnostic("../m.onnx: already located"),
        Diagnostic("in the manifest", SourceLocation("BUILD.yaml", 3, 5)),
    ])
    assert in_file(err, "../m.onnx").render().splitlines() == [
        "error: ../m.onnx: c backend cannot run node 'n' of region r0: op TopK not implemented",
        "error: ../m.onnx: already located",
        "BUILD.yaml:3:5: error: in the manifest",
    ]
