"""`buildgen explain`, `buildgen report` and `buildgen tune` on a small model."""

import json
import textwrap
from pathlib import Path

import pytest
from test_partition_builds import _model

from buildgen.cli import main
from buildgen.partition.cost.records import load_records


def _project(tmp_path: Path, partition: str = "{}", pins: str = "{}") -> Path:
    _model(tmp_path / "blocks.onnx")
    manifest = tmp_path / "BUILD.yaml"
    manifest.write_text(textwrap.dedent(f"""\
        buildgen: 1
        targets:
          fast: {{kind: composite, host: {{kind: c, opt_level: 1}}, accelerators: [tgemm, tvec]}}
        models:
          blocks:
            source: blocks.onnx
            inputs: {{x: [4, 16]}}
            targets: [fast]
            pin: {pins}
            partition: {partition}
        """))
    return manifest


def test_explain_prints_regions_reasons_and_what_each_accelerator_said(plugin, tmp_path, capsys):
    manifest = _project(tmp_path, pins='{"/l2/Add": host}')
    assert main(["explain", "blocks", "--target", "fast", "--manifest", str(manifest)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("blocks for target fast: 5 region(s); backends in priority order: "
                          "tgemm > tvec > c\n")
    assert "r0  tgemm (accelerator), 4 node(s)\n    why: pattern tgemm.gemm_bias_act" in out
    assert "    why: pin '/l2/Add' -> host" in out
    # A node the host runs lists every other backend's answer.
    assert "    - /head/Exp (Exp)\n        tgemm: no tgemm pattern has Exp\n" \
           "        tvec: no tvec pattern has Exp\n" in out


def test_explain_json_and_unknown_names(plugin, tmp_path, capsys):
    manifest = _project(tmp_path)
    assert main(["explain", "blocks", "--json", "--manifest", str(manifest)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["target"] for r in doc["regions"]] == ["tgemm", "tvec", "c", "tvec"]
    assert doc["regions"][2]["nodes"][0]["declined"] == {
        "tgemm": "no tgemm pattern has Exp", "tvec": "no tvec pattern has Exp"}
    assert main(["explain", "blocs", "--manifest", str(manifest)]) == 1
    assert "did you mean 'blocks'?" in capsys.readouterr().err


@pytest.mark.slow
def test_report_writes_a_self_contained_page_and_svg(plugin, tmp_path):
    manifest = _project(tmp_path)
    assert main(["report", "--manifest", str(manifest)]) == 0
    out = tmp_path / "build" / "blocks" / "fast"
    page = (out / "report.html").read_text()
    svg = (out / "partition.svg").read_text()
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg"') and svg in page
    assert "<script" not in page and "http" not in page.replace("http://www.w3.org", "")
    assert page.count('<g class="region"') == 4 and svg.count('<g class="node">') == 8
    assert "pattern tgemm.gemm_bias_act" in page and "no tvec pattern has Exp" in page
    assert 'fill="#d9d9d9"' in svg  # the host's colour on its nodes
    before = page
    assert main(["report", "--manifest", str(manifest)]) == 0
    assert (out / "report.html").read_text() == before


@pytest.mark.slow
def test_tune_measures_each_kernel_once_and_the_cost_policy_uses_the_records(
    plugin, tmp_path, capsys
):
    manifest = _project(tmp_path, partition="{policy: cost, records: cpu.records.json}")
    assert main(["tune", "--dry-run", "--manifest", str(manifest)]) == 0
    alone = capsys.readouterr().out.splitlines()[0]
    # A second model with the same kernels, and a second target of the same meaning.
    manifest.write_text(textwrap.dedent("""\
        buildgen: 1
        targets:
          fast: {kind: composite, host: {kind: c, opt_level: 1}, accelerators: [tgemm, tvec]}
          again: {kind: composite, host: {kind: c, opt_level: 1}, accelerators: [tgemm, tvec]}
        models:
          blocks:
            source: blocks.onnx
            inputs: {x: [4, 16]}
            targets: [fast, again]
            partition: {policy: cost, records: cpu.records.json}
          twin:
            source: blocks.onnx
            inputs: {x: [4, 16]}
            targets: [fast]
            partition: {policy: cost, records: cpu.records.json}
        """))
    assert main(["tune", "--manifest", str(manifest), "--min-time", "0.002"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == alone  # the same distinct kernels: each measured once
    records = load_records(tmp_path / "cpu.records.json")
    assert f"{len(records.by_key)} to measure" in out and len(records.by_key) > 10
    assert all(r.seconds > 0 and r.runs > 0 for r in records.by_key.values())
    backends = {json.loads(k)["backend"] for k in records.by_key}
    assert backends == {"c", "tgemm", "tvec"}
    # A second run measures nothing new.
    assert main(["tune", "--manifest", str(manifest)]) == 0
    assert "0 to measure" in capsys.readouterr().out
    assert main(["build", "--manifest", str(manifest)]) == 0
    doc = json.loads((tmp_path / "build" / "blocks" / "fast" / "partition.json").read_text())
    assert all("tuning record cpu.records.json" in r["reason"] for r in doc["regions"])


def test_tune_dry_run_lists_kernels_and_needs_a_records_file(plugin, tmp_path, capsys):
    manifest = _project(tmp_path)
    assert main(["tune", "--manifest", str(manifest)]) == 1
    assert "names no tuning-records file" in capsys.readouterr().err
    assert main(["tune", "--dry-run", "--records", str(tmp_path / "r.json"),
                 "--manifest", str(manifest)]) == 0
    out = capsys.readouterr().out
    assert "tgemm.gemm_bias_act MatMul+Add+Relu [4, 16] -> [4, 32]   (blocks/fast)" in out
    assert "c MatMul+Add+Relu [4, 16] -> [4, 32]" in out  # the host's fused chain too
    assert not (tmp_path / "r.json").exists()
