"""`activation_layout: auto`: `buildgen tune --backend onednn` times the model's library with
each layout into tuning records, and codegen takes the fastest recorded
(buildgen/backends/onednn/tuned_layout.py, tune.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cpulib_build import (
    REPO,
    assert_matches_onnxruntime,
    assert_reported_arena_is_the_librarys,
    composite,
    imported,
    library,
    one_region,
    run_build,
    source,
    write_manifest,
)
from cpulib_cases import conv_block, gemm_variants, resblock

from buildgen.backends.libraries import ONEDNN_PIP, pip_onednn_prefix
from buildgen.backends.onednn.backend import OneDNNBackend, settings_of
from buildgen.backends.onednn.tuned_layout import (
    CANDIDATES,
    has_layout_choice,
    layout_key,
    module_digest,
    tuned_layout,
)
from buildgen.cache.journal import journal_size, read_entries
from buildgen.errors import BuildgenError
from buildgen.partition.cost.keys import key_text
from buildgen.partition.cost.records import Record, Records

OPTIONS = {"threads": 1, "fpmath_mode": "strict", "activation_layout": "auto"}
INPUTS = {"x": (1, 8, 12, 12)}


def _records(digest: str, seconds: dict[str, float]) -> Records:
    return Records({key_text(layout_key(digest, layout, OPTIONS)): Record(
        key_text(layout_key(digest, layout, OPTIONS)), s, 10, "test machine")
        for layout, s in seconds.items()}, "r.json")


def test_auto_takes_the_fastest_layout_only_when_every_candidate_is_recorded(tmp_path: Path
                                                                           ) -> None:
    graph, _ = imported(conv_block(), INPUTS, tmp_path)
    partition = one_region(graph, "onednn")
    digest = module_digest(graph, partition)
    faster_any = _records(digest, {"channels_last": 2e-3, "any": 1e-3})
    chosen = tuned_layout(graph, partition, OPTIONS, faster_any)
    assert chosen is not None and chosen.layout == "any"
    assert settings_of(OPTIONS, chosen).layout == "any"
    assert "r.json: channels_last 2 ms, any 1 ms" in settings_of(OPTIONS, chosen).layout_origin
    # A tie keeps channels-last; a missing candidate, another thread count or no records
    # leave the default.
    tie = tuned_layout(graph, partition, OPTIONS, _records(digest, {"channels_last": 1e-3,
                                                                    "any": 1e-3}))
    assert tie is not None and tie.layout == "channels_last"
    assert tuned_layout(graph, partition, OPTIONS, _records(digest, {"any": 1e-3})) is None
    assert tuned_layout(graph, partition, {**OPTIONS, "threads": 2}, faster_any) is None
    assert settings_of(OPTIONS, None).layout == "channels_last"
    assert "no tuning records" in settings_of(OPTIONS, None).layout_origin
    # A layout set on the target is kept whatever the records say.
    assert settings_of({**OPTIONS, "activation_layout": "channels_last"}, chosen).layout == \
        "channels_last"


def test_the_records_key_names_no_model_or_tensor(tmp_path: Path) -> None:
    """The same structure under other model and node names keys the same records; another
    model does not."""
    for sub in "abc":
        (tmp_path / sub).mkdir()
    model = conv_block()
    graph, _ = imported(model, INPUTS, tmp_path / "a")
    model.graph.name = "renamed"
    for node in model.graph.node:
        node.name = f"other_{node.name}"
    renamed, _ = imported(model, INPUTS, tmp_path / "b")
    assert renamed.name != graph.name
    other, _ = imported(resblock(), {"x": (1, 8, 10, 10)}, tmp_path / "c")
    digests = [module_digest(g, one_region(g, "onednn")) for g in (graph, renamed, other)]
    assert digests[0] == digests[1] != digests[2]


def test_a_module_its_layout_changes_nothing_in_has_no_choice(tmp_path: Path) -> None:
    """GEMMs, or one convolution alone in its region, read and write plain tensors only: no
    layout to tune, nothing for explain to say."""
    for sub in "abc":
        (tmp_path / sub).mkdir()
    convs, _ = imported(conv_block(), INPUTS, tmp_path / "a")
    gemms, _ = imported(gemm_variants(), {"a": (8, 16)}, tmp_path / "b")
    first_conv = one_region(convs, "onednn", [convs.nodes[0].name])
    assert has_layout_choice(convs, one_region(convs, "onednn"))
    assert not has_layout_choice(gemms, one_region(gemms, "onednn"))
    assert not has_layout_choice(convs, first_conv)
    notes = OneDNNBackend().module_notes
    assert notes(convs, one_region(convs, "onednn"), OPTIONS) == (
        "activation layout: channels_last (auto, no tuning records for this module)",)
    assert notes(gemms, one_region(gemms, "onednn"), OPTIONS) == ()


def _need_onednn() -> None:
    try:
        pip_onednn_prefix()
    except BuildgenError:
        pytest.skip(f"oneDNN is not installed: {ONEDNN_PIP}")


def _buildgen(manifest: Path, command: str, *words: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "buildgen", command, "--manifest",
                           str(manifest), *words], cwd=manifest.parent, env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _tune(manifest: Path, *words: str) -> str:
    return _buildgen(manifest, "tune", "--backend", "onednn", *words)


def _ran(manifest: Path) -> list[str]:
    """Build; the outputs of the actions that ran this time."""
    build_dir = manifest.parent / "build"
    offset = journal_size(build_dir) if build_dir.exists() else 0
    run_build(manifest, build_dir)
    return sorted(entry.output for entry in read_entries(build_dir, offset))


def test_tune_records_each_layout_and_the_build_takes_the_faster(tmp_path: Path) -> None:
    _need_onednn()
    manifest = write_manifest(tmp_path, {"conv_block": (conv_block(), INPUTS)},
                              composite("onednn", threads=1))
    data = yaml.safe_load(manifest.read_text())
    data["partition"] = {"records": "onednn.records.json"}
    manifest.write_text(yaml.safe_dump(data))
    # Named before it exists: the build goes ahead without records.
    assert "conv_block/lib/src/onednn.c" in _ran(manifest)
    assert "Activation layout: channels_last (auto, no tuning records" in \
        source(tmp_path / "build", "conv_block", "onednn")

    printed = _tune(manifest)
    assert "conv_block/lib activation_layout: channels_last" in printed
    assert "conv_block/lib activation_layout: any" in printed
    path = tmp_path / "onednn.records.json"
    records = json.loads(path.read_text())["records"]
    assert sorted(r["key"]["layout"] for r in records) == sorted(CANDIDATES)
    assert all(r["key"]["choice"] == "activation_layout" and r["seconds"] > 0 for r in records)
    assert "0 measurements to make" in _tune(manifest, "--dry-run")  # measured once

    first = _ran(manifest)
    assert "conv_block/lib/src/onednn.c" in first
    seconds = {r["key"]["layout"]: r["seconds"] for r in records}
    fastest = min(CANDIDATES, key=seconds.__getitem__)  # a tie: the earlier, as the build
    assert f"Activation layout: {fastest} (tuning records onednn.records.json" in \
        source(tmp_path / "build", "conv_block", "onednn")
    assert_matches_onnxruntime(library(tmp_path / "build", "conv_block"),
                               tmp_path / "conv_block.onnx")

    # Records saying the other layout is faster: the onednn module is generated, compiled
    # and linked again, and the report (its arena) made again; nothing else runs.
    other = next(layout for layout in CANDIDATES if layout != fastest)
    for record in records:
        record["seconds"] = 1e-3 if record["key"]["layout"] == other else 2e-3
    path.write_text(json.dumps({"format": "buildgen-tuning-records", "version": 1,
                                "records": records}))
    again = _ran(manifest)
    assert again == sorted(["conv_block/lib/src/onednn.c", "conv_block/lib/obj/onednn.o",
                            "conv_block/lib/libconv_block.so", "conv_block/lib/libconv_block.a",
                            "conv_block/lib/report.json"]), again
    assert f"Activation layout: {other} (tuning records" in \
        source(tmp_path / "build", "conv_block", "onednn")
    explained = _buildgen(manifest, "explain", "conv_block")
    assert f"module choices:\n    onednn: activation layout: {other} (tuning records " \
        "onednn.records.json: channels_last " in explained, explained
    assert_matches_onnxruntime(library(tmp_path / "build", "conv_block"),
                               tmp_path / "conv_block.onnx")
    assert_reported_arena_is_the_librarys(library(tmp_path / "build", "conv_block"),
                                          "conv_block")
