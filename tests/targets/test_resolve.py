import json

import pytest

from buildgen.errors import BuildgenError, SourceLocation
from buildgen.targets import get_kind, load_target_file, resolve_target


def test_bare_kind_is_a_composite_with_defaults():
    target = resolve_target("cpu", "c")
    assert target.host.kind == "c"
    assert target.host.get("opt_level") == 3
    assert target.accelerators == ()
    assert target.backends == ("c",)


def test_attributes_override_defaults_and_reach_the_compile_flags():
    target = resolve_target(
        "cpu",
        {"kind": "composite", "host": {"kind": "c", "opt_level": 1, "march": "x86-64-v3",
                                        "cflags": ["-g"]}},
    )
    tc = target.toolchain("c")
    assert tc.cc == "cc"
    assert "-O1" in tc.cflags and "-march=x86-64-v3" in tc.cflags and tc.cflags[-1] == "-g"
    assert not any(f.startswith("-mcpu") for f in tc.cflags)  # unset optional flag


def test_codegen_options_hold_only_codegen_attributes():
    target = resolve_target("cpu", {"kind": "c", "opt_level": 2})
    assert target.codegen_options("c") == {"profile": False, "threads": 1}


def test_threads_reach_the_c_module_and_are_bounded():
    assert resolve_target("cpu", {"kind": "c", "threads": 0}).codegen_options("c")[
        "threads"] == 0
    assert resolve_target("cpu", {"kind": "c", "threads": 8}).codegen_options("c")[
        "threads"] == 8
    with pytest.raises(BuildgenError, match="threads"):
        resolve_target("cpu", {"kind": "c", "threads": 257})
    with pytest.raises(BuildgenError, match="threads"):
        resolve_target("cpu", {"kind": "c", "threads": -1})


def test_canonical_json_round_trips_and_is_sorted(tmp_path):
    target = resolve_target("cpu", {"kind": "c", "opt_level": 2})
    text = target.canonical_json()
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=1) + "\n"
    (tmp_path / "t.json").write_text(text)
    assert load_target_file(tmp_path / "t.json") == target


def test_unknown_attribute_is_located_with_a_suggestion():
    locations = {("targets", "cpu", "host", "opt_levl"): SourceLocation("BUILD.yaml", 4, 21)}
    with pytest.raises(BuildgenError) as info:
        resolve_target(
            "cpu", {"kind": "composite", "host": {"kind": "c", "opt_levl": 2}}, locations.get
        )
    (diag,) = info.value.diagnostics
    assert str(diag.location) == "BUILD.yaml:4:21"
    assert "unknown attribute 'opt_levl' for kind 'c'" in diag.message
    assert diag.hint == "did you mean 'opt_level'?"


def test_bad_attribute_value_and_unknown_kind_are_all_reported():
    with pytest.raises(BuildgenError) as info:
        resolve_target(
            "cpu", {"kind": "composite", "host": {"kind": "c", "opt_level": 7},
                    "accelerators": [{"kind": "cc"}]}
        )
    messages = [d.message for d in info.value.diagnostics]
    assert any("targets.cpu.host.opt_level" in m and "7" in m for m in messages)
    assert any("unknown target kind 'cc'" in m for m in messages)


def test_every_attribute_documents_its_default():
    for attr in get_kind("c").attributes:
        assert attr.description, attr.name
        # "none": how a compile runs (compiler_launcher, e.g. ccache) but not what it makes.
        assert attr.affects in {"codegen", "compile", "link", "none"}, attr.name
