"""`buildgen run` end to end on the committed examples (mlp, cnn), in a scratch project:
its outputs are the Python runtime's bit for bit and onnxruntime's within the bar, --compare
exits 0 (1 beyond the tolerance, printing the error), bad inputs are clear errors, and a
second run reuses the driver. One build of both models, at -O1 and one ISA level."""

from __future__ import annotations

import os
import platform
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from buildgen import runtime
from buildgen.cli import main

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# One compile per module (the default compiles one per x86-64 level): this is about running.
LEVELS = ", isa_levels: [x86-64]" if platform.machine() == "x86_64" else ""
MANIFEST = f"""buildgen: 1
targets:
  cpu: {{kind: composite, host: {{kind: c, opt_level: 1{LEVELS}}}}}
models:
  mlp: {{source: models/mlp.onnx, inputs: {{x: [8, 512]}}, targets: [cpu]}}
  cnn: {{source: models/cnn.onnx, inputs: {{image: [1, 3, 32, 32]}}, targets: [cpu]}}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The scratch project, both libraries built (by a first `run` of each)."""
    root = tmp_path_factory.mktemp("run-project")
    (root / "models").mkdir()
    for model in ("mlp", "cnn"):
        shutil.copy(REPO / "examples" / "models" / f"{model}.onnx", root / "models")
    (root / "BUILD.yaml").write_text(MANIFEST)
    with pytest.MonkeyPatch.context() as patch:
        # ninja's actions run `python -m buildgen.stages`: they must find this checkout.
        path = os.environ.get("PYTHONPATH")
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), path])))
        yield root


def _run(project: Path, *argv: str) -> int:
    return main(["-C", str(project), "run", *argv])


def _library(project: Path, model: str) -> Path:
    return project / "build" / model / "cpu" / f"lib{model}.so"


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_outputs_match_the_runtime_and_onnxruntime(project, model, capfd, tmp_path):
    out = tmp_path / "out.npz"
    assert _run(project, model, "--seed", "7", "--output", str(out), "--compare") == 0
    printed = capfd.readouterr().out
    assert f"{model}/cpu: inputs random, seed 7; ran in " in printed
    assert "compared with onnxruntime (rtol 0.0001, atol 1e-05):" in printed
    assert printed.rstrip().endswith("ok")
    compiled = runtime.load(_library(project, model))
    try:
        from buildgen.run.tensors import random_inputs, specs

        feeds = random_inputs(specs(_graph_inputs(compiled)), 7)
        expected = compiled.run(feeds)
    finally:
        compiled.close()
    with np.load(out) as got:
        assert sorted(got.files) == sorted(expected)
        for name, value in expected.items():
            np.testing.assert_array_equal(got[name], value)  # the same library, same bits
            assert f"  {name}  float32[" in printed


def _graph_inputs(compiled: runtime.CompiledModel):
    from buildgen.ir.graph import DType, TensorType, Value

    return [Value(i.name, TensorType(DType(i.dtype.name), i.shape)) for i in compiled.inputs]


def test_inputs_from_npz_and_a_second_run_reuses_the_driver(project, capfd, tmp_path):
    _run(project, "cnn")  # built, driver compiled
    driver = project / "build" / "cnn" / "cpu" / "run" / "driver"
    before = driver.stat()
    image = np.random.default_rng(1).standard_normal((1, 3, 32, 32))  # float64: cast
    np.savez(tmp_path / "in.npz", image=image)
    out = tmp_path / "out.npz"
    assert _run(project, "cnn", "--target", "cpu", "--inputs", str(tmp_path / "in.npz"),
                "--output", str(out), "--repeat", "3") == 0
    assert "3 runs, " in capfd.readouterr().out
    after = driver.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    compiled = runtime.load(_library(project, "cnn"))
    try:
        (expected,) = compiled(image.astype(np.float32))
    finally:
        compiled.close()
    with np.load(out) as got:
        np.testing.assert_array_equal(got[compiled.output_names[0]], expected)


def test_beyond_the_tolerance_exits_1_with_the_max_error(project, capfd, monkeypatch):
    from buildgen.run import compare

    real = compare.onnxruntime_outputs

    def off_by_a_little(*args, **kwargs):
        return {k: v + np.float32(1e-2) for k, v in real(*args, **kwargs).items()}

    monkeypatch.setattr(compare, "onnxruntime_outputs", off_by_a_little)
    assert _run(project, "mlp", "--compare") == 1
    out, err = capfd.readouterr()
    assert "max abs error 0.01" in out and "MISMATCH" in out
    assert "1 of 1 outputs differ from onnxruntime's beyond the tolerance: y" in err
    assert _run(project, "mlp", "--compare", "--atol", "0.1") == 0


def test_bad_inputs_list_what_the_model_takes(project, capfd, tmp_path):
    np.savez(tmp_path / "in.npz", images=np.zeros((1, 3, 32, 32), np.float32))
    assert _run(project, "cnn", "--inputs", str(tmp_path / "in.npz")) == 1
    err = capfd.readouterr().err
    assert "missing 'image'; unknown 'images'" in err
    assert "the model's inputs are image: float32[1, 3, 32, 32]" in err
    (tmp_path / "bad.npz").write_bytes(b"PK not really")
    assert _run(project, "cnn", "--inputs", str(tmp_path / "bad.npz")) == 1
    assert "not a readable .npz file" in capfd.readouterr().err


def test_unknown_model_and_target(project, capfd):
    assert _run(project, "mpl") == 1
    assert "no model 'mpl' in BUILD.yaml" in capfd.readouterr().err
    assert _run(project, "mlp", "--target", "gpu") == 1
    assert "model 'mlp' is not built for target 'gpu'; its targets: cpu" in capfd.readouterr().err


def test_the_driver_runs_under_an_emulator_prefix(project, tmp_path):
    from buildgen.run.execute import run_driver
    from buildgen.run.tensors import TensorSpec, read_raw, write_raw

    _run(project, "mlp")
    driver = project / "build" / "mlp" / "cpu" / "run" / "driver"
    x = TensorSpec("x", np.dtype("float32"), (8, 512))
    y = TensorSpec("y", np.dtype("float32"), (8, 10))
    feeds = {"x": np.linspace(-1, 1, 8 * 512, dtype=np.float32).reshape(8, 512)}
    write_raw(tmp_path / "in", [x], feeds)
    ran = run_driver(driver, ["env"], tmp_path / "in", tmp_path / "out", 2, "mlp/cpu")
    assert ran.runs == 2 and ran.seconds > 0
    compiled = runtime.load(_library(project, "mlp"))
    try:
        np.testing.assert_array_equal(read_raw(tmp_path / "out", [y])["y"], compiled(feeds["x"])[0])
    finally:
        compiled.close()


@pytest.mark.parametrize("prefix, message", [
    (None, "mlp/cpu: the target is for another architecture and has no emulator to run it"),
    (("/no/such/qemu-aarch64",), "emulator '/no/such/qemu-aarch64' is not an executable on PATH"),
])
def test_an_emulator_that_is_not_there(project, capfd, monkeypatch, prefix, message):
    from buildgen.run import execute

    monkeypatch.setattr(execute, "emulator_for", lambda target: prefix)
    assert _run(project, "mlp") == 1
    err = capfd.readouterr().err
    assert message in err and "apt-get install qemu-user" in err
