"""`python -m buildgen.stages`: thin, fast to start, and never leaves stale outputs."""

import pytest
from cli_helpers import run_python

from buildgen import __version__
from buildgen.stages.runner import depfile_text

STAGE = ("-m", "buildgen.stages", "--buildgen-version", __version__)


def test_help_lists_stages_without_importing_heavy_modules():
    done = run_python("-X", "importtime", *STAGE[:2], "--help")
    assert done.returncode == 0
    for stage in ("import", "partition", "codegen", "executor", "report"):
        assert stage in done.stdout
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines()}
    assert not {"onnx", "numpy", "jsonschema", "yaml"} & imported


def test_a_version_mismatch_asks_for_gen(tmp_path):
    done = run_python("-m", "buildgen.stages", "--buildgen-version", "0.0.0-other", "report",
                      cwd=tmp_path)
    assert done.returncode == 1
    assert "run `buildgen gen`" in done.stderr


def _import_args(source):
    return (*STAGE, "import", "--model", "tiny", "--source", source, "--input", "x=2,4",
            "--graph", "out/graph.json", "--weights", "out/weights.bin",
            "--constants", "out/constants.bin", "--depfile", "out/graph.json.d")


def test_import_writes_outputs_and_a_depfile_then_leaves_them_alone(tmp_path, tiny_onnx):
    done = run_python(*_import_args(tiny_onnx.name), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    assert out.joinpath("graph.json").read_text().startswith("{")
    assert out.joinpath("weights.bin").stat().st_size >= 48
    assert out.joinpath("graph.json.d").read_text() == "out/graph.json: tiny.onnx\n"
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    again = run_python(*_import_args(tiny_onnx.name), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    after = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert after["graph.json"] == before["graph.json"]  # unchanged bytes: untouched (restat)
    assert after["weights.bin"] == before["weights.bin"]


def test_a_failing_stage_removes_its_stale_outputs(tmp_path):
    (tmp_path / "bad.onnx").write_text("not a model")
    out = tmp_path / "out"
    out.mkdir()
    for name in ("graph.json", "weights.bin", "graph.json.d"):
        (out / name).write_text("old")
    done = run_python(*_import_args("bad.onnx"), cwd=tmp_path)
    assert done.returncode == 1
    assert "error" in done.stderr and "Traceback" not in done.stderr
    assert list(out.iterdir()) == []


def test_a_missing_input_is_an_error_not_a_traceback(tmp_path):
    done = run_python(*STAGE, "partition", "--model", "m", "--target", "t.json",
                      "--graph", "missing.json", "--out", "p.json", cwd=tmp_path)
    assert done.returncode == 1
    assert "missing.json" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("path", "escaped"), [
    ("a b.onnx", "a\\ b.onnx"),
    ("cost$.onnx", "cost$$.onnx"),
    ("x#1.bin", "x\\#1.bin"),
    ("dir\\ x", "dir\\\\\\ x"),
    ("dir\\x", "dir\\x"),
])
def test_depfile_escaping(path, escaped):
    assert depfile_text("g.json", [path]) == f"g.json: {escaped}\n"
