"""`buildgen targets`: the listing, and --show of a resolved target."""

import json

from buildgen.cli import main
from buildgen.targets import get_kind, parse_target, registered_kinds, registered_tags


def run(capsys, *args):
    status = main(["targets", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_the_listing_names_every_kind_attribute_default_and_tag(capsys):
    status, out, _ = run(capsys)
    assert status == 0
    for name, kind in registered_kinds().items():
        assert f"\n{name}: " in out
        for attr in kind.attributes:
            assert f"    {attr.name} " in out, (name, attr.name)
    assert "cutlass: external codegen for cuda (cuda); builds" in out
    assert "cuda: device (cuda); builds" in out
    assert "c: host (cpu); builds" in out
    assert "no code generator yet" not in out  # every built-in kind declares its backend
    for name in registered_tags():
        assert f"  {name} " in out
    assert "x86-fast         onednn > openblas > c {march: \"x86-64-v3\"}" in out


def test_the_listing_can_be_narrowed_to_some_names(capsys):
    status, out, _ = run(capsys, "cutlass", "cuda-fast")
    assert status == 0
    assert "\ncutlass: " in out and "split_k_slices          [1]    codegen" in out
    assert "cuda-fast  cutlass > cudnn > cublas > cuda > c" in out
    assert "onednn" not in out
    status, _, err = run(capsys, "cutlas")
    assert status == 1 and "no target kind or tag named 'cutlas'" in err
    assert "hint: did you mean 'cutlass'?" in err


def test_show_prints_the_canonical_target_of_a_manifest(capsys, manifest_file):
    path = manifest_file("""
        buildgen: 1
        targets:
          gpu:
            kind: composite
            device: {kind: cuda, arch: sm_90a}
            accelerators: [cuda-cutlass, {kind: cublas, allow_tf32: true}]
        """)
    status, out, _ = run(capsys, "--show", "gpu", "--manifest", str(path))
    assert status == 0
    data = json.loads(out)
    assert data["name"] == "gpu" and [a["kind"] for a in data["accelerators"]] == [
        "cutlass", "cublas"]
    assert data["accelerators"][0]["sm"] == 90 and data["accelerators"][1]["allow_tf32"]
    expected = parse_target({"kind": "composite", "device": {"kind": "cuda", "arch": "sm_90a"},
                             "accelerators": ["cutlass", {"kind": "cublas", "allow_tf32": True}]},
                            name="gpu")
    assert out == expected.canonical_json()


def test_show_reports_manifest_errors_with_positions(capsys, manifest_file):
    path = manifest_file("""
        buildgen: 1
        targets:
          gpu: {kind: composite, accelerators: [cutlass]}
        """)
    status, _, err = run(capsys, "--show", "gpu", "--manifest", str(path))
    assert status == 1
    assert "BUILD.yaml:3:41: error: targets.gpu.accelerators[0]: 'cutlass' is external codegen " \
           "for 'cuda', but this composite has no 'cuda' device" in err
    assert "hint: add device: {kind: cuda} to the composite" in err


def test_show_without_a_manifest_knows_registered_names(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no BUILD.yaml here
    status, out, _ = run(capsys, "--show", "cuda")
    assert status == 0
    data = json.loads(out)
    assert data["device"]["arch"] == get_kind("cuda").attribute("arch").default
    assert data["host"]["kind"] == "c"
    status, _, err = run(capsys, "--show", "x86-onedn")
    assert status == 1 and "no target kind or tag named 'x86-onedn'" in err
    assert "did you mean 'x86-onednn'?" in err


def test_show_takes_the_manifest_in_the_current_folder(capsys, manifest_file, monkeypatch):
    path = manifest_file("buildgen: 1\ntargets:\n  mine: {tag: x86-v3, host: {opt_level: 1}}\n")
    monkeypatch.chdir(path.parent)
    status, out, _ = run(capsys, "--show", "mine")
    assert status == 0 and json.loads(out)["host"]["opt_level"] == 1


def test_misused_options_are_errors(capsys):
    assert run(capsys, "--manifest", "BUILD.yaml")[0] == 1
    assert run(capsys, "c", "--show", "c")[0] == 1


def test_the_docs_example_is_the_real_output():
    from pathlib import Path

    from buildgen.targets.listing import listing

    page = (Path(__file__).resolve().parents[2] / "docs" / "targets.md").read_text()
    command = "$ buildgen targets cutlass x86-fast\n"
    assert command in page
    example = page.split(command, 1)[1].split("```", 1)[0]
    assert example == listing(["cutlass", "x86-fast"])
