"""docs/troubleshooting.md shows what buildgen really prints.

Each ```text block the page marks with `<!-- example: NAME -->` is reproduced here: the
input the page describes is written to tmp_path, buildgen runs on it, and the block must
appear in what it printed, with tmp_path shown as the page's /home/you/project. A marked
block without a test here fails too, so the page cannot drift from the code.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from buildgen.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"
PROJECT = "/home/you/project"  # how the page shows the project's folder
EXAMPLE = re.compile(r"^<!-- example: ([\w-]+) -->\n```text\n(.*?)\n```$", re.S | re.M)

MLP_MANIFEST = """\
buildgen: 1
models:
  mlp:
    source: mlp.onnx
    inputs: {x: [8, 512]}
    targets: [c]
"""


def page_examples() -> dict[str, str]:
    found: dict[str, str] = {}
    for match in EXAMPLE.finditer(PAGE.read_text()):
        assert match[1] not in found, f"example {match[1]!r} is marked twice"
        found[match[1]] = match[2]
    return found


def _save_model(path: Path, nodes: list[onnx.NodeProto],
                initializers: Sequence[onnx.TensorProto] = ()) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])
    graph = helper.make_graph(nodes, path.stem, [x], [y], list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def _relu_model(path: Path) -> None:
    _save_model(path, [helper.make_node("Relu", ["x"], ["y"], name="relu")])


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path as the current folder, holding mlp.onnx (a stand-in: gen reads no model)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    _relu_model(tmp_path / "mlp.onnx")
    return tmp_path


def normalised(text: str, folder: Path) -> str:
    for form in {str(folder.resolve()), str(folder)}:
        text = text.replace(form, PROJECT)
    return text


Runner = Callable[..., str]


@pytest.fixture
def buildgen(project: Path, capsys: pytest.CaptureFixture[str]) -> Runner:
    """Run `buildgen ARGS` in-process, expecting exit status 1; what it printed."""

    def run(*args: str) -> str:
        assert main(list(args)) == 1
        captured = capsys.readouterr()
        return normalised(captured.out + captured.err, project)

    return run


def _shown(name: str, output: str) -> None:
    block = page_examples()[name]
    assert block in output, f"docs/troubleshooting.md example {name!r} is not what " \
        f"buildgen prints; it printed:\n{output}"


def test_manifest_typo(project: Path, buildgen: Runner) -> None:
    (project / "BUILD.yaml").write_text(
        "buildgen: 1\nmodels:\n  mlp:\n    sorce: mlp.onnx\n    inputs: {x: [eight, 512]}\n"
        "    targets: [c]\n"
    )
    _shown("manifest-typo", buildgen("gen"))


def test_manifest_yaml(project: Path, buildgen: Runner) -> None:
    (project / "BUILD.yaml").write_text(
        "buildgen: 1\nmodels:\n  mlp:\n    source: mlp.onnx\n   targets: [c]\n"
    )
    _shown("manifest-yaml", buildgen("gen"))


def test_manifest_names(project: Path, buildgen: Runner) -> None:
    (project / "BUILD.yaml").write_text("""\
buildgen: 1
targets:
  fast:
    kind: composite
    host: {kind: c, opt_level: 3}
models:
  my-model:
    source: mlp.onnx
    inputs: {x: [8, 512]}
    targets: [fsat]
  int:
    source: missing.onnx
    targets: [fast, fast]
""")
    _shown("manifest-names", buildgen("gen"))


def test_manifest_duplicate(project: Path, buildgen: Runner) -> None:
    (project / "BUILD.yaml").write_text(
        MLP_MANIFEST + "  mlp:\n    source: mlp.onnx\n    targets: [c]\n"
    )
    _shown("manifest-duplicate", buildgen("gen"))


def test_target_attributes(project: Path, buildgen: Runner) -> None:
    (project / "BUILD.yaml").write_text("""\
buildgen: 1
targets:
  fast:
    kind: composite
    host: {kind: c, opt_levle: 2}
    accelerators: [cuda]
  blas:
    kind: openblass
models:
  mlp:
    source: mlp.onnx
    inputs: {x: [8, 512]}
    targets: [fast, blas]
""")
    _shown("target-attributes", buildgen("gen"))


def test_target_tags(project: Path, buildgen: Runner) -> None:
    (project / "BUILD.yaml").write_text("""\
buildgen: 1
targets:
  a:
    tag: x86-fastt
  b:
    kind: composite
    host: x86-fast
models:
  mlp:
    source: mlp.onnx
    inputs: {x: [8, 512]}
    targets: [a, b, x86-v4]
""")
    _shown("target-tags", buildgen("gen"))


def test_build_folder(project: Path, buildgen: Runner) -> None:
    (project / "BUILD.yaml").write_text(MLP_MANIFEST)
    (project / "other").mkdir()
    (project / "other" / "CMakeCache.txt").write_text("")
    output = buildgen("gen", "--build-dir", ".") + buildgen("gen", "--build-dir", "other")
    _shown("build-folder", output)
    assert not (project / "other" / "build.ninja").exists()


def test_remote_credentials(
    project: Path, buildgen: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "BUILD.yaml").write_text(MLP_MANIFEST)
    monkeypatch.setenv("BUILDGEN_REMOTE_CACHE", "https://bob:secret@cache.example.com/bg")
    output = buildgen("build")
    _shown("remote-credentials", output)
    assert "secret" not in output


def test_cmake_model(project: Path, buildgen: Runner) -> None:
    (project / "BUILD.yaml").write_text(MLP_MANIFEST)
    _shown("cmake-model", buildgen("cmake", "--model", "mpl"))


def test_unsupported_op(tmp_path: Path) -> None:
    """Through ninja: `buildgen explain` runs the import and the partition (no compile)."""
    pytest.importorskip("scipy_openblas32")  # the target's openblas, found at gen
    _save_model(tmp_path / "cumsum.onnx", [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("CumSum", ["r", "axis"], ["y"], name="running_total"),
    ], [numpy_helper.from_array(np.array(1, np.int64), "axis")])
    (tmp_path / "BUILD.yaml").write_text(
        "buildgen: 1\nmodels:\n  cumsum:\n    source: cumsum.onnx\n"
        "    targets: [x86-openblas]\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "buildgen", "explain", "cumsum"], cwd=tmp_path,
        capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    _shown("unsupported-op", normalised(done.stdout + done.stderr, tmp_path))


def test_every_marked_example_is_tested() -> None:
    tested = {name.removeprefix("test_").replace("_", "-")
              for name in globals() if name.startswith("test_")}
    untested = set(page_examples()) - tested
    assert not untested, f"marked examples without a test here: {sorted(untested)}"
    assert len(page_examples()) >= 6
