"""Incremental builds: each edit re-runs exactly the actions whose inputs changed.

One real build of two small models (made with onnx.helper) in a folder whose name has a
space, then edits, each followed by a plain `ninja` whose printed descriptions are the
actions that ran (restat-skipped actions print nothing).
"""

import os
import re
from pathlib import Path

import pytest

from buildgen.cli import main
from buildgen.ninja.tool import run_ninja
from buildgen.targets import get_kind, resolve_target

pytestmark = pytest.mark.slow

MANIFEST = """\
buildgen: 1
targets:
  cpu: {kind: composite, host: {kind: c, opt_level: 2}}
  small: {kind: c, opt_level: 1}
models:
  mlp:
    source: models/mlp.onnx
    inputs: {x: [2, 4]}
    targets: [cpu, small]
  other:
    source: models/other.onnx
    inputs: {x: [3, 4]}
    targets: [cpu]
"""


def _save_model(path, hidden):
    """relu(x @ w + b) with random weights; returns a numpy reference of the model."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(hidden)
    w = numpy_helper.from_array(rng.standard_normal((4, hidden)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(hidden).astype(np.float32), "b")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
            helper.make_node("Add", ["h", "b"], ["hb"], name="add"),
            helper.make_node("Relu", ["hb"], ["y"], name="relu"),
        ],
        path.stem,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w, b],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.save(model, path)
    return lambda x: np.maximum(x @ numpy_helper.to_array(w) + numpy_helper.to_array(b), 0)


def _ninja(build):
    """Run ninja; return the descriptions of the actions that ran."""
    done = run_ninja(build, ["-d", "explain"], capture=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return {m.group(1) for m in re.finditer(r"^\[ran\] (.*)$", done.stdout, re.MULTILINE)}


def _edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "my project"
    reference = _save_model(root / "models" / "mlp.onnx", 8)
    _save_model(root / "models" / "other.onnx", 6)
    (root / "BUILD.yaml").write_text(MANIFEST)
    monkeypatch.setenv("NINJA_STATUS", "[ran] ")
    return root, reference


def _check_runs(library, reference, rows):
    import numpy as np

    from buildgen.runtime import load

    x = np.random.default_rng(0).standard_normal((rows, 4)).astype(np.float32)
    model = load(library)
    try:
        (y,) = model(x)
    finally:
        model.close()
    np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-5)


def test_edits_rerun_only_what_they_affect(project):
    root, reference = project
    manifest, build = root / "BUILD.yaml", root / "build"
    assert main(["build", "--manifest", str(manifest)]) == 0
    for model, target in (("mlp", "cpu"), ("mlp", "small"), ("other", "cpu")):
        for name in (f"lib{model}.so", f"lib{model}.a", f"include/{model}.h", "report.md"):
            assert (build / model / target / name).is_file()
    _check_runs(build / "mlp" / "cpu" / "libmlp.so", reference, 2)

    # A second build has nothing to do.
    assert _ninja(build) == set()

    # Touching the manifest, or adding a comment, re-runs gen only.
    target_json = build / "_targets" / "cpu" / "target.json"
    stamp = target_json.stat().st_mtime_ns
    os.utime(manifest)
    assert _ninja(build) == {"GEN build.ninja"}
    with manifest.open("a") as f:
        f.write("# a comment changes no meaning\n")
    assert _ninja(build) == {"GEN build.ninja"}
    assert target_json.stat().st_mtime_ns == stamp
    assert _ninja(build) == set()

    # One model's input shape rebuilds that model only.
    _edit(manifest, "inputs: {x: [2, 4]}", "inputs: {x: [5, 4]}")
    ran = _ninja(build)
    assert {
        "GEN build.ninja",
        "IMPORT mlp",
        "CC mlp/cpu model.o",
        "LINK mlp/small libmlp.so",
    } <= ran
    assert not [d for d in ran if "other" in d]
    # The weights did not change: restat stopped the wave before their object.
    assert "CC mlp/cpu weights.o" not in ran
    assert _ninja(build) == set()
    _check_runs(build / "mlp" / "small" / "libmlp.so", reference, 5)

    # A compile flag of one target recompiles and relinks that target's objects, nothing
    # else; its toolchain is a new one, so the shared kernels its library links (and the
    # eager ones) are compiled (once) too, into a new folder the link list names.
    _edit(manifest, "small: {kind: c, opt_level: 1}", "small: {kind: c, opt_level: 3}")
    ran = _ninja(build)
    levels = resolve_target("small", {"kind": "c"}).toolchain("c").variants
    shared = {d for d in ran if d.split()[1].startswith("_shared/")}
    assert len({d.split()[1].rsplit("/", 1)[0] for d in shared}) == 1  # one new folder
    spec = get_kind("c").shared_kernels
    assert spec is not None
    linked = (build / "mlp" / "small" / "src" / "c.link.rsp").read_text().split()
    families = {Path(obj).name.split(".")[0] for obj in linked} | {
        Path(source).stem for source in spec.eager}
    assert len(shared) == len(families) * max(1, len(levels))
    assert ran - shared == {
        "GEN build.ninja",
        "KERNELS mlp/small c",  # the objects' folder changed, not the module: no CODEGEN
        *({f"CC mlp/small c.{v.level}.o" for v in levels} or {"CC mlp/small c.o"}),
        "CC mlp/small model.o",  # not weights.o: its command has no -O (data only)
        "LINK mlp/small libmlp.so",
        "AR mlp/small libmlp.a",
    }
    assert _ninja(build) == set()
