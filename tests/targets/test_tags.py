"""Tags: registered ones (rules/tags.yaml), targets of a manifest used as tags, overrides."""

import pytest

from buildgen.errors import BuildgenError
from buildgen.resources import rules_dir
from buildgen.targets import parse_target, registered_tags, resolve_tag, resolve_target


def messages(data, definitions=None):
    with pytest.raises(BuildgenError) as info:
        resolve_target("t", data, definitions=definitions)
    return sorted(d.message for d in info.value.diagnostics)


@pytest.mark.parametrize("name", sorted(registered_tags()))
def test_every_registered_tag_resolves_and_is_described(name):
    target = resolve_tag(name)
    assert registered_tags()[name].description
    assert registered_tags()[name].file == rules_dir() / "tags.yaml"
    assert target.same_as(parse_target(name))


def test_the_registered_tags_the_issue_names():
    assert resolve_tag("x86-onednn").backends == ("onednn", "c")
    assert resolve_tag("x86-openblas").backends == ("openblas", "c")
    assert resolve_tag("cuda-cutlass").backends == ("cutlass", "cuda", "c")
    assert resolve_tag("cuda-cublas").backends == ("cublas", "cuda", "c")
    # Nested tags flatten: cuda-fast is three cuda tags in a row.
    assert resolve_tag("cuda-fast").backends == ("cutlass", "cudnn", "cublas", "cuda", "c")


def test_a_tag_reference_overrides_attributes_of_its_members():
    fast = parse_target({"tag": "x86-onednn", "host": {"opt_level": 2},
                         "onednn": {"threads": 4}})
    assert fast.host.get("opt_level") == 2 and fast.host.get("march") == "x86-64-v3"
    assert fast.instance("onednn").get("threads") == 4
    assert fast.instance("onednn").get("opt_level") == 2  # inherited after the override
    gpu = parse_target({"tag": "cuda-cutlass", "device": {"arch": "sm_90a"},
                        "cutlass": {"split_k_slices": [1, 2, 4]}})
    assert gpu.device is not None and gpu.device.get("arch") == "sm_90a"
    assert gpu.instance("cutlass").get("sm") == 90
    assert gpu.instance("cutlass").get("split_k_slices") == (1, 2, 4)


def test_an_override_on_a_defaulted_host_changes_the_default_host():
    gpu = parse_target({"tag": "cuda-cublas", "host": {"opt_level": 1}})
    assert gpu.host.kind == "c" and gpu.host.get("opt_level") == 1


def test_an_override_can_replace_a_member_or_the_accelerators():
    replaced = parse_target({"tag": "x86-onednn", "accelerators": ["openblas", "onednn"]})
    assert replaced.backends == ("openblas", "onednn", "c")
    assert replaced.host.get("march") == "x86-64-v3"
    generic = parse_target({"tag": "x86-onednn", "host": "c"})
    assert generic.host.get("march") is None


def test_override_mistakes_are_reported():
    assert messages({"tag": "x86-onednn", "opt_level": 2, "cudnn": {}, "host": {"opt_levl": 2},
                     "onednn": {"kind": "openblas"}, "device": {"arch": "sm_80"}}) == [
        "targets.t.cudnn: tag 'x86-onednn' has no 'cudnn' to override; it has c, onednn",
        "targets.t.device: tag 'x86-onednn' has no device to override",
        "targets.t.host.opt_levl: unknown attribute 'opt_levl' for kind 'c'",
        "targets.t.onednn.kind: this overrides the 'onednn' member; its kind stays 'onednn'",
        "targets.t.opt_level: unknown key 'opt_level' on a reference to tag 'x86-onednn'",
    ]


def test_tag_and_kind_are_not_interchangeable():
    assert messages({"tag": "c"}) == ["targets.t.tag: 'c' is a target kind, not a tag"]
    assert messages({"kind": "x86-onednn"}) == [
        "targets.t.kind: 'x86-onednn' is a tag, not a target kind"]
    assert messages({"tag": "x86-onedn"}) == ["targets.t.tag: unknown tag 'x86-onedn'"]


def test_targets_of_a_manifest_are_tags_for_each_other():
    definitions = {"base": {"kind": "composite", "host": {"kind": "c", "march": "x86-64-v3"},
                            "accelerators": ["onednn"]}}
    fast = resolve_target("fast", {"tag": "base", "host": {"opt_level": 1}},
                          definitions=definitions)
    assert fast.backends == ("onednn", "c")
    assert (fast.host.get("march"), fast.host.get("opt_level")) == ("x86-64-v3", 1)
    # A bare name works too, and inside a composite's accelerators.
    both = resolve_target("both", {"kind": "composite", "device": "cuda",
                                   "accelerators": ["base", "cutlass"]}, definitions=definitions)
    assert both.backends == ("onednn", "cutlass", "cuda", "c")


def test_a_manifest_target_may_take_the_name_of_the_registered_tag_it_refines():
    # Inside its own definition the name means the registered tag, not itself.
    mine = resolve_target("x86-onednn", {"tag": "x86-onednn", "onednn": {"threads": 2}})
    assert mine.instance("onednn").get("threads") == 2
    # Elsewhere the manifest's definition wins over the registered tag...
    user = resolve_target("user", "x86-onednn", definitions={"x86-onednn": "c"})
    assert user.backends == ("c",)
    # ...but a registered tag never sees the manifest's names.
    nested = resolve_target("n", "x86-fast", definitions={"x86-onednn": "c"})
    assert nested.backends == ("onednn", "openblas", "c")


def test_a_cycle_of_tags_is_reported_once():
    found = messages("a", definitions={"a": {"tag": "b"},
                                       "b": {"kind": "composite", "accelerators": ["a"]}})
    assert found == ["targets.b.accelerators[0]: target 'a' refers to itself: a -> b -> a"]
