"""Which actions a change re-runs, counted from the action journal (.buildgen/actions.jsonl):
only those whose output the change can alter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from small_project import write_project

from buildgen.cache.journal import journal_size, read_entries

REPO = Path(__file__).resolve().parents[2]


def _build(project: Path) -> list[str]:
    """Build; the outputs of the actions that ran (or were restored) this time."""
    build_dir = project / "build"
    offset = journal_size(build_dir) if build_dir.exists() else 0
    _summary(project)
    return sorted(entry.output for entry in read_entries(build_dir, offset))


def test_opt_level_recompiles_code_and_never_reassembles_weights(tmp_path: Path) -> None:
    manifest = write_project(tmp_path / "p")
    first = _build(manifest.parent)
    assert "tiny/cpu/obj/weights.o" in first
    manifest.write_text(manifest.read_text().replace('"opt_level": 1', '"opt_level": 2'))
    again = _build(manifest.parent)
    assert "tiny/cpu/obj/model.o" in again and "tiny/cpu/libtiny.so" in again
    assert "tiny/cpu/obj/weights.o" not in again
    # Python stages read no compile flag: none of them runs again.
    assert not [out for out in again if out.endswith((".json", ".c", ".h", ".S"))], again


def _save_wide_model(path: Path, bump: float = 0.0) -> None:
    """relu(x @ w + b) with w [64, 512]: 128 KiB, larger than a code constant."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    w = rng.standard_normal((64, 512)).astype(np.float32)
    w[0, 0] += bump
    b = rng.standard_normal(512).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Add", ["h", "b"], ["hb"], name="add"),
         helper.make_node("Relu", ["hb"], ["y"], name="relu")],
        "wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.save(model, path)


def test_editing_a_large_weight_reruns_import_assembly_and_link_only(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "models").mkdir(parents=True)
    _save_wide_model(project / "models" / "wide.onnx")
    (project / "BUILD.yaml").write_text(
        "buildgen: 1\ntargets:\n  cpu: {kind: c, opt_level: 1, march: x86-64}\n"
        "models:\n  wide:\n    source: models/wide.onnx\n    targets: [cpu]\n"
    )
    first = _build(project)
    assert "wide/cpu/src/c.c" in first and "wide/cpu/report.json" in first
    _save_wide_model(project / "models" / "wide.onnx", bump=1.0)
    again = _build(project)
    assert again == sorted([
        "wide/graph.json", "wide/cpu/obj/weights.o", "wide/cpu/libwide.so",
        "wide/cpu/libwide.a",
    ]), again
    # The bias (2 KiB) is a code constant, kept in constants.bin; the matrix is not.
    assert (project / "build" / "wide" / "constants.bin").stat().st_size == 512 * 4


def test_a_no_op_build_counts_its_actions_from_the_memo_not_a_second_ninja(tmp_path):
    """The summary's "N up to date" comes from `ninja -t commands`, run once per build.ninja
    and names: a no-op build reads the count kept beside the build (.buildgen/planned.json)."""
    import json

    manifest = write_project(tmp_path / "p")
    _build(manifest.parent)
    memo = manifest.parent / "build" / ".buildgen" / "planned.json"
    kept = json.loads(memo.read_text())
    # What ninja lists, and the kernels objects the dyndep files added besides.
    built = len(_built_outputs(manifest.parent))
    assert f"{built} up to date" in _summary(manifest.parent)
    (plan,) = kept["plans"].values()
    assert plan["lists"] == ["tiny/cpu/src/c.link.rsp"]
    plan["count"] = 999 - (built - plan["count"])  # a count only the memo knows
    memo.write_text(json.dumps(kept))
    assert "999 up to date" in _summary(manifest.parent)
    # A new build.ninja (a changed flag): counted again by ninja.
    manifest.write_text(manifest.read_text().replace('"opt_level": 1', '"opt_level": 2'))
    assert "999" not in _summary(manifest.parent)


def _summary(project: Path) -> str:
    """Build; what buildgen printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")}
    env["BUILDGEN_PREBUILT"] = "off"  # as tests/conftest.py says
    env.update(PYTHONPATH=str(REPO), BUILDGEN_CACHE_DIR=str(project.parent / "cache"))
    done = subprocess.run([sys.executable, "-m", "buildgen", "build"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _built_outputs(project: Path) -> set[str]:
    return {entry.output for entry in read_entries(project / "build", 0)}
