"""`buildgen build` of the examples through the local cache, in clones at different paths.

Clone A builds with an empty cache; clone B, at another path with the same cache, then
runs no tool at all and gets the same library bytes. An edited weight re-runs only that
model's actions. Two builds sharing one empty cache at the same time both finish correctly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MODELS = ("cnn", "encoder", "mlp")


def make_clone(dest: Path) -> Path:
    (dest / "examples").mkdir(parents=True)
    shutil.copy2(REPO / "BUILD.yaml", dest / "BUILD.yaml")
    shutil.copytree(REPO / "examples" / "models", dest / "examples" / "models")
    return dest


def start_build(clone: Path, cache: Path, *names: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")}
    env["BUILDGEN_PREBUILT"] = "off"  # as tests/conftest.py says
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["BUILDGEN_CACHE_DIR"] = str(cache)
    return subprocess.Popen(
        [sys.executable, "-m", "buildgen", "build", *names],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def build(clone: Path, cache: Path, *names: str) -> list[dict[str, object]]:
    """Build; return the journal lines this build added."""
    journal = clone / "build" / ".buildgen" / "actions.jsonl"
    before = len(journal.read_text().splitlines()) if journal.exists() else 0
    process = start_build(clone, cache, *names)
    output, _ = process.communicate(timeout=900)
    assert process.returncode == 0, output
    assert "buildgen: " in output and "time by stage:" in output  # the summary
    return [json.loads(line) for line in journal.read_text().splitlines()[before:]]


def libraries(clone: Path, models=MODELS) -> dict[str, bytes]:
    out = {}
    for model in models:
        for name in (f"lib{model}.so", f"lib{model}.a", f"include/{model}.h"):
            out[f"{model}/{name}"] = (clone / "build" / model / "cpu" / name).read_bytes()
    return out


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """Clone A built with an empty cache: (cache folder, A's libraries, A's journal)."""
    root = tmp_path_factory.mktemp("cache-e2e")
    cache = root / "cache"
    clone = make_clone(root / "clone-a")
    entries = build(clone, cache)
    return cache, libraries(clone), entries


def test_a_fresh_clone_elsewhere_runs_nothing_and_gets_the_same_bytes(warm, tmp_path):
    cache, expected, first = warm
    assert {e["outcome"] for e in first} == {"ran"}
    clone = make_clone(tmp_path / "deeper" / "clone-b")
    entries = build(clone, cache)
    assert len(entries) == len(first)
    ran = [e["out"] for e in entries if e["outcome"] != "local"]
    assert ran == [], f"actions ran in the warm clone: {ran}"
    assert libraries(clone) == expected


def test_an_edited_weight_reruns_only_that_models_actions(warm, tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    cache, expected, _ = warm
    clone = make_clone(tmp_path / "clone-c")
    build(clone, cache)
    source = clone / "examples" / "models" / "mlp.onnx"
    model = onnx.load(str(source))
    weight = model.graph.initializer[0]
    array = numpy_helper.to_array(weight).copy()
    array.flat[0] += 1.0
    weight.CopyFrom(numpy_helper.from_array(array, weight.name))
    onnx.save(model, str(source))
    entries = build(clone, cache)
    assert entries, "nothing re-ran after a weight changed"
    assert all(str(e["out"]).startswith("mlp/") for e in entries), entries
    ran = {e["out"] for e in entries if e["outcome"] == "ran"}
    assert "mlp/graph.json" in ran and "mlp/cpu/libmlp.so" in ran
    changed = libraries(clone, ("mlp",))
    assert changed["mlp/libmlp.so"] != expected["mlp/libmlp.so"]
    assert libraries(clone, ("cnn", "encoder")) == {
        k: v for k, v in expected.items() if not k.startswith("mlp/")
    }


def test_two_builds_sharing_one_empty_cache_at_once_both_finish(warm, tmp_path):
    _, expected, _ = warm
    cache = tmp_path / "shared-cache"
    clones = [make_clone(tmp_path / f"clone-{i}") for i in range(2)]
    processes = [start_build(clone, cache, "mlp") for clone in clones]
    for process in processes:
        output, _ = process.communicate(timeout=900)
        assert process.returncode == 0, output
    wanted = {k: v for k, v in expected.items() if k.startswith("mlp/")}
    for clone in clones:
        assert libraries(clone, ("mlp",)) == wanted
    # Afterwards the cache is whole: a third clone restores everything.
    third = make_clone(tmp_path / "clone-3")
    entries = build(third, cache, "mlp")
    assert {e["outcome"] for e in entries} == {"local"}
