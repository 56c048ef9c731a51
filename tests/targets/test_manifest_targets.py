"""Targets in a manifest: every error at its line and column, and what gen may build."""

import pytest

from buildgen.errors import BuildgenError
from buildgen.ninja.gen import generate
from buildgen.targets import resolve_manifest_target, resolve_targets

MODEL = """
models:
  m:
    source: m.onnx
    targets: [{targets}]
"""


def test_resolve_targets_gives_defined_and_registered_names(manifest):
    m = manifest("""
        buildgen: 1
        targets:
          cpu: {tag: x86-onednn, host: {opt_level: 2}}
          plain: c
        models:
          m: {source: m.onnx, targets: [plain, x86-v3]}
        """)
    targets = resolve_targets(m)  # cpu has onednn, which cannot be built, but no model uses it
    assert sorted(targets) == ["cpu", "plain", "x86-v3"]
    assert targets["x86-v3"].host.get("march") == "x86-64-v3"
    assert targets["cpu"].backends == ("onednn", "c")


def test_every_target_error_points_at_its_line_and_column(manifest, errors):
    m = manifest("""
        buildgen: 1
        targets:
          alone: cutlass
          nodev: {kind: composite, accelerators: [{kind: cutlass, split_k_slices: [2]}]}
          wrong: {kind: composite, host: cuda, device: {kind: cuda, arch: sm90}}
          typo: {kind: composite, host: {kind: c, opt_levl: 2}, acelerators: []}
          over: {tag: cuda-cutlass, cutlass: {sm: 20}, cudnn: {}}
          two: {kind: composite, host: {kind: c, march: x86-64-v2}, accelerators: [x86-onednn]}
          cuda: {kind: cuda}
          loop: {kind: composite, accelerators: [loop2]}
          loop2: {tag: loop}
        """)
    assert errors(lambda: resolve_targets(m)) == [
        "3:10: targets.alone: 'cutlass' is an external codegen for 'cuda': it cannot be a "
        "target on its own",
        "4:43: targets.nodev.accelerators[0]: 'cutlass' is external codegen for 'cuda', but "
        "this composite has no 'cuda' device (it has no device)",
        "5:34: targets.wrong.host: 'cuda' is a cuda device kind (the host runs on the cpu), so "
        "it cannot be the host",
        "5:67: targets.wrong.device.arch: expected text matching ^sm_[0-9]+[a-z]?$, got 'sm90'",
        "6:43: targets.typo.host.opt_levl: unknown attribute 'opt_levl' for kind 'c'",
        "6:57: targets.typo.acelerators: unknown key 'acelerators' in a composite target",
        "7:43: targets.over.cutlass.sm: expected at least 50, got 20",
        "7:48: targets.over.cudnn: tag 'cuda-cutlass' has no 'cudnn' to override; it has "
        "cuda, cutlass",
        f"8:76: targets.two.accelerators[0]: this host 'c' differs from the host at "
        f"{m.path}:8:32 in march (\"x86-64-v2\" there, \"x86-64-v3\" here) (through tag "
        "'x86-onednn')",
        "9:3: targets.cuda: target name 'cuda' is the name of a target kind",
        "11:16: targets.loop2.tag: target 'loop' refers to itself: loop -> loop2 -> loop",
    ]


def test_diagnostics_carry_the_source_line_a_caret_and_a_hint(manifest):
    m = manifest("""
        buildgen: 1
        targets:
          cpu: {kind: composite, host: {kind: c, opt_levl: 2}}
        """)
    with pytest.raises(BuildgenError) as info:
        resolve_targets(m)
    assert info.value.render().endswith(
        "BUILD.yaml:3:42: error: targets.cpu.host.opt_levl: unknown attribute 'opt_levl' for "
        "kind 'c'\n"
        "    cpu: {kind: composite, host: {kind: c, opt_levl: 2}}\n"
        "                                           ^\n"
        "  hint: did you mean 'opt_level'?"
    )


def test_a_bad_value_hints_at_the_attributes_meaning_and_default(manifest):
    m = manifest("""
        buildgen: 1
        targets:
          cpu: {kind: c, opt_level: 7}
        """)
    with pytest.raises(BuildgenError) as info:
        resolve_targets(m)
    (diag,) = info.value.diagnostics
    assert diag.message == "targets.cpu.opt_level: expected at most 3, got 7"
    assert diag.hint == ("opt_level: Optimisation level passed as -O<n> (default: 3; see "
                         "`buildgen targets c`)")


def test_a_model_naming_an_external_codegen_alone_is_told_why(manifest, errors):
    m = manifest("buildgen: 1\n" + MODEL.format(targets="c, cutlass"))
    assert errors(lambda: resolve_targets(m)) == [
        "6:18: models.m.targets[1]: 'cutlass' is an external codegen for 'cuda': it cannot be "
        "a target on its own"
    ]


def test_building_a_kind_without_a_code_generator_fails_at_gen(
    manifest_file, errors, tmp_path, without_backend
):
    without_backend("cuda", "cutlass", "cublas")
    path = manifest_file("""
        buildgen: 1
        targets:
          gpu:
            kind: composite
            device: {kind: cuda, arch: sm_90a}
            accelerators: [cutlass]
        models:
          m: {source: m.onnx, targets: [gpu, cuda-cublas, c]}
        """)
    assert errors(lambda: generate(path)) == [
        "5:13: targets.gpu.device: kind 'cuda' has no code generator in this buildgen yet, so "
        "target 'gpu' (used by model 'm') cannot be built",
        "6:20: targets.gpu.accelerators[0]: kind 'cutlass' has no code generator in this "
        "buildgen yet, so target 'gpu' (used by model 'm') cannot be built",
        "8:38: models.m.targets[1]: kinds 'cublas', 'cuda' have no code generator in this "
        "buildgen yet, so target 'cuda-cublas' (used by model 'm') cannot be built (through "
        "tag 'cuda-cublas')",
    ]
    assert not (tmp_path / "build").exists()  # nothing written: the build never starts


def test_show_resolves_targets_that_cannot_be_built(manifest):
    m = manifest("""
        buildgen: 1
        targets:
          gpu: {tag: cuda-cutlass, cutlass: {split_k_slices: [1, 2]}}
          broken: cutlass
        """)
    gpu = resolve_manifest_target(m, "gpu")
    assert gpu.instance("cutlass").get("split_k_slices") == (1, 2)
    assert resolve_manifest_target(m, "cuda-fast").backends[-2:] == ("cuda", "c")
    with pytest.raises(BuildgenError, match="no target 'gpus' in BUILD.yaml") as info:
        resolve_manifest_target(m, "gpus")
    assert info.value.diagnostics[0].hint == "did you mean 'gpu'?"
    with pytest.raises(BuildgenError, match="cannot be a target on its own"):
        resolve_manifest_target(m, "broken")


def test_the_manifest_schema_lets_tag_overrides_omit_the_kind(manifest_file, errors):
    from buildgen.manifest import load_manifest
    from buildgen.targets import is_known_target

    path = manifest_file("""
        buildgen: 1
        targets:
          a: {tag: x86-onednn, host: {opt_level: 2}, device: {kind: cuda}}
          b: {tag: x86-onednn, host: 5}
          c2: {kind: composite, host: {opt_level: 2}}
        """)
    assert errors(lambda: load_manifest(path, is_known_target)) == [
        "4:30: targets.b.host: expected a target kind or tag name, or a mapping of attributes, "
        "got 5",
        "5:25: targets.c2.host: a target needs a 'kind' or a 'tag'",
    ]
