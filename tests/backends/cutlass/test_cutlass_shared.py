"""Kernel shards shared across a manifest's models: the stage and the ninja plan."""

from __future__ import annotations

import argparse
from pathlib import Path

from cutlass_cases import ROOT, generate, model, partition, target

from buildgen.backends.cutlass import CutlassBackend
from buildgen.backends.cutlass.shards import render_shard
from buildgen.stages import shared_kernels_stage
from buildgen.stages.runner import run_stage

RENDER = "buildgen.backends.cutlass.shards:render_shard"


def _listing(name: str, as_model: str) -> str:
    t = target()
    imported = model(name)
    return CutlassBackend().generate_with_kernels(
        as_model, imported.graph, partition(name), t.codegen_options("cutlass"),
        imported.weights())[1]


def _run(folder: Path, lists: list[Path], shards: int = 4) -> dict[str, float]:
    """Run the stage; each output's mtime afterwards."""
    args = argparse.Namespace(kind="cutlass", render=RENDER, out_dir=str(folder),
                              shards=shards, ext="cu", index=str(folder / "index.md"),
                              lists=[str(p) for p in lists])
    assert run_stage(shared_kernels_stage, args) == 0
    return {p: Path(p).stat().st_mtime_ns for p in shared_kernels_stage.outputs(args)}


def test_a_second_model_with_the_same_layers_changes_no_shard(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(_listing("mlp", "a"))
    b.write_text(_listing("mlp", "b"))
    out = tmp_path / "shards"
    before = _run(out, [a])
    texts = {p: Path(p).read_text() for p in before}
    after = _run(out, [a, b])
    index = str(out / "index.md")
    for path in before:
        if path != index:
            assert after[path] == before[path], path  # not rewritten: nothing recompiles
            assert Path(path).read_text() == texts[path]
    assert "- b/target region r0" in Path(index).read_text()


def test_every_kernel_is_in_exactly_one_shard(tmp_path: Path) -> None:
    lists = []
    for name in ("mlp", "cnn", "encoder"):
        path = tmp_path / f"{name}.json"
        path.write_text(generate(name)[1])
        lists.append(path)
    outputs = _run(tmp_path / "out", lists, shards=3)
    shards = [Path(p).read_text() for p in outputs if p.endswith(".cu")]
    names = set()
    for path in lists:
        names |= {line.split('"')[3] for line in path.read_text().splitlines()
                  if line.strip().startswith('"name"')}
    for name in names:
        assert sum(f"extern \"C\" int {name}(" in s for s in shards) == 1, name
        shard = shared_kernels_stage.shard_of(name, 3)
        assert f"extern \"C\" int {name}(" in shards[shard]


def test_an_empty_shard_includes_nothing() -> None:
    text = render_shard(2, 4, [])
    assert "#include" not in text and "No instantiation" in text


MANIFEST = """\
buildgen: 1
targets:
  gpu:
    kind: composite
    host: {{kind: c}}
    device: {{kind: cuda, arch: sm_90}}
    accelerators: [{{kind: cutlass{extra}}}]
models:
  a: {{source: {mlp}, inputs: {{x: [8, 512]}}, targets: [gpu]}}
  b: {{source: {mlp}, inputs: {{x: [8, 512]}}, targets: [gpu]}}
"""


def test_plan_has_one_shard_set_linked_by_every_model(tmp_path: Path) -> None:
    from buildgen.ninja.gen import generate as gen

    manifest = tmp_path / "BUILD.yaml"
    manifest.write_text(MANIFEST.format(extra="", mlp=ROOT / "examples/models/mlp.onnx"))
    text = gen(manifest, tmp_path / "build").build_ninja.read_text()
    lines = text.splitlines()
    kernels = [line for line in lines if " shared_kernels " in f" {line} "
               and line.startswith("build ")]
    assert len(kernels) == 1
    assert "a/gpu/src/cutlass.kernels.json b/gpu/src/cutlass.kernels.json" in kernels[0]
    folder = kernels[0].split()[1].rsplit("/", 1)[0]
    assert folder.startswith("_shared/cutlass-")
    compiles = [line for line in lines if line.startswith(f"build {folder}/shard_")
                and ": cc " in line]
    assert len(compiles) == 4
    for lib in ("a/gpu/liba.so", "b/gpu/libb.so"):
        link = next(line for line in lines if line.startswith(f"build {lib}:"))
        assert f" {folder}/libcutlass_kernels.a" in link  # with the c host's kernels
    codegen = next(line for line in lines if line.startswith("build a/gpu/src/cutlass.cu"))
    assert "a/gpu/src/cutlass.kernels.json" in codegen.split(":")[0]


def test_tuning_records_are_an_input_of_the_cutlass_codegen(tmp_path: Path) -> None:
    from buildgen.ninja.gen import generate as gen

    mlp = ROOT / "examples/models/mlp.onnx"
    (tmp_path / "BUILD.yaml").write_text(MANIFEST.format(extra="", mlp=mlp).replace(
        "targets: [gpu]}\n  b:", "targets: [gpu], partition: {records: rec.json}}\n  b:"))
    (tmp_path / "rec.json").write_text(
        '{"format": "buildgen-tuning-records", "version": 1, "records": []}\n')
    text = gen(tmp_path / "BUILD.yaml", tmp_path / "build").build_ninja.read_text()
    lines = text.splitlines()
    a = lines.index(next(x for x in lines if x.startswith("build a/gpu/src/cutlass.cu")))
    b = lines.index(next(x for x in lines if x.startswith("build b/gpu/src/cutlass.cu")))
    assert "rec.json" in lines[a] and "--records" in "".join(lines[a:a + 4])
    assert "rec.json" not in "".join(lines[b:b + 4])  # b names no records
