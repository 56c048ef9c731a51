"""Canonical form and hashing: what gen writes per target and per backend, and which edits
change which files (and so re-run which actions)."""

import json
from pathlib import Path

from buildgen.fsutil import write_if_changed
from buildgen.ninja.actions import plan_build
from buildgen.ninja.context import GenContext, generator_inputs
from buildgen.ninja.gen import generate
from buildgen.ninja.genfiles import gen_files
from buildgen.resources import rules_dir
from buildgen.targets import get_kind, load_target_file, parse_target, resolve_manifest_target

GPU = """
buildgen: 1
targets:
  gpu:
    kind: composite
    device: {{kind: cuda, arch: {arch}}}
    accelerators:
      - {{kind: cutlass, split_k_slices: {split_k}, use_multiprocessing: {multi}}}
      - cublas
models:
  m: {{source: m.onnx, targets: [gpu]}}
"""


def _context(root: Path) -> GenContext:
    return GenContext(
        manifest=root / "BUILD.yaml", root=root, build_dir=root / "build",
        python=("python3",), version="0", include_dir=root / "include", generator_inputs=(),
    )


def _gen(manifest, tmp_path, **values) -> tuple[set[str], dict[str, list[str]]]:
    """Write gen's per-target files for the GPU manifest into one build dir, as gen does
    (write_if_changed); return the files rewritten and, per file, the actions reading it.
    gen itself refuses cuda targets (no code generator yet), so its two steps run here."""
    text = GPU.format(**{"arch": "sm_80", "split_k": "[1, 2]", "multi": "true", **values})
    m = manifest(text)
    targets = {"gpu": resolve_manifest_target(m, "gpu")}
    files = gen_files(m.models, targets)
    plan = plan_build(m.models, targets, _context(tmp_path), tuple(files))
    readers: dict[str, list[str]] = {}
    for action in plan.actions:
        for path in (*action.inputs, *action.implicit):
            readers.setdefault(path, []).append(action.outputs[0])
    build = tmp_path / "build"
    changed = {rel for rel, body in files.items() if write_if_changed(build / rel, body)}
    return changed, readers


def test_split_k_slices_changes_only_the_cutlass_options_file(manifest, tmp_path):
    _gen(manifest, tmp_path)
    changed, readers = _gen(manifest, tmp_path, split_k="[1, 2, 4]")
    assert changed == {"_targets/gpu/target.json", "_targets/gpu/options/cutlass.json"}
    # target.json is the full canonical record: no action reads it.
    assert "_targets/gpu/target.json" not in readers
    assert readers["_targets/gpu/options/cutlass.json"] == ["m/gpu/src/cutlass.cu"]
    options = json.loads((tmp_path / "build/_targets/gpu/options/cutlass.json").read_text())
    assert options["backend"] == "cutlass"
    assert options["options"]["split_k_slices"] == [1, 2, 4]
    assert "use_multiprocessing" not in options["options"]  # changes no output
    assert "opt_level" not in options["options"]  # a compile flag: on the command line


def test_a_run_only_attribute_changes_no_file_an_action_reads(manifest, tmp_path):
    _gen(manifest, tmp_path)
    changed, readers = _gen(manifest, tmp_path, multi="false")
    assert changed == {"_targets/gpu/target.json"} and not changed & set(readers)


def test_the_device_arch_reaches_every_file_that_depends_on_it(manifest, tmp_path):
    _gen(manifest, tmp_path)
    changed, _ = _gen(manifest, tmp_path, arch="sm_90a")
    # cutlass inherits sm (partition-affecting) from the arch; cublas only compiles with it,
    # so its options file stays, and its new -arch is on its compile command line.
    assert changed == {
        "_targets/gpu/target.json", "_targets/gpu/options/target.json",
        "_targets/gpu/options/cuda.json", "_targets/gpu/options/cutlass.json",
    }


def test_editing_a_manifest_tag_re_resolves_every_target_using_it(manifest_file, tmp_path):
    text = """
        buildgen: 1
        targets:
          base: {{kind: c, march: {march}}}
          fast: {{tag: base, host: {{opt_level: 2}}}}
          small: {{tag: base, host: {{opt_level: 1}}}}
        models:
          m: {{source: m.onnx, targets: [fast, small]}}
        """
    generate(manifest_file(text.format(march="x86-64-v3")))
    result = generate(manifest_file(text.format(march="x86-64-v2")))
    # march is a compile flag: the targets change, the files codegen reads do not (the
    # c host's kernels objects, compiled with it, move to another folder).
    assert set(result.changed) == {
        "build.ninja", "_targets/fast/target.json", "_targets/small/target.json",
        "_targets/fast/kernels/c.objects", "_targets/small/kernels/c.objects"}
    small = load_target_file(tmp_path / "build/_targets/small/target.json")
    assert (small.host.get("march"), small.host.get("opt_level")) == ("x86-64-v2", 1)


def test_registered_tags_are_generator_inputs():
    # Editing rules/tags.yaml re-runs gen, which re-resolves every target using a tag.
    assert rules_dir() / "tags.yaml" in generator_inputs()


def test_the_canonical_form_is_sorted_complete_and_round_trips(tmp_path):
    target = parse_target({"tag": "cuda-fast", "cutlass": {"split_k_slices": [1, 2]}})
    text = target.canonical_json()
    data = json.loads(text)
    assert text == json.dumps(data, sort_keys=True, indent=1) + "\n"
    assert [a["kind"] for a in data["accelerators"]] == ["cutlass", "cudnn", "cublas"]
    assert data["accelerators"][0]["sm"] == 80  # inherited values are written out
    assert set(data["device"]) == {"kind", *(a.name for a in get_kind("cuda").attributes)}
    (tmp_path / "t.json").write_text(text)
    assert load_target_file(tmp_path / "t.json") == target


def test_targets_compare_by_meaning():
    a = parse_target("x86-onednn", name="a")
    b = parse_target({"kind": "composite", "host": {"kind": "c", "march": "x86-64-v3",
                                                    "opt_level": 3}, "accelerators": ["onednn"]},
                     name="b")
    assert a != b and a.same_as(b) and a.digest() == b.digest()
    c = parse_target({"tag": "x86-onednn", "onednn": {"threads": 2}})
    assert not a.same_as(c) and a.digest() != c.digest()


def test_the_partition_view_keeps_only_partition_attributes():
    gpu = parse_target({"tag": "cuda-cutlass", "device": {"arch": "sm_90a"}})
    view = gpu.partition_view()
    assert view.backends == gpu.backends
    assert dict(view.device.attrs) == {"arch": "sm_90a"}
    assert dict(view.instance("cutlass").attrs) == {"sm": 90}
    assert view.host.attrs == ()
