"""Composite targets: roles, the one host and device, external codegens' devices, priority,
flattening of nested composites, primary targets, and inherited attributes."""

import pytest

from buildgen.errors import BuildgenError
from buildgen.targets import parse_target, resolve_target


def messages(data, **kw):
    with pytest.raises(BuildgenError) as info:
        resolve_target("t", data, **kw)
    return [d.message for d in info.value.diagnostics]


def test_accelerators_keep_their_order_which_is_their_priority():
    gpu = parse_target({
        "kind": "composite", "device": {"kind": "cuda"},
        "accelerators": ["cublas", {"kind": "cutlass"}, "cudnn"],
    })
    assert gpu.backends == ("cublas", "cutlass", "cudnn", "cuda", "c")
    assert [a.kind for a in gpu.accelerators] == ["cublas", "cutlass", "cudnn"]


def test_the_host_is_defaulted_to_c_never_guessed_from_the_device():
    gpu = parse_target({"kind": "cuda", "arch": "sm_90a"})
    assert gpu.host == parse_target("c").host  # c with its defaults, nothing from the device
    assert gpu.device is not None and gpu.device.get("arch") == "sm_90a"
    explicit = parse_target({"kind": "composite", "host": {"kind": "c", "opt_level": 1},
                             "device": "cuda"})
    assert explicit.host.get("opt_level") == 1


@pytest.mark.parametrize("alone", ["cutlass", {"kind": "cutlass", "sm": 80}, "onednn"])
def test_an_external_codegen_cannot_stand_alone(alone):
    (message,) = messages(alone)
    assert "is an external codegen for" in message and "cannot be a target on its own" in message


def test_an_external_codegen_needs_its_device_in_the_composite():
    (message,) = messages({"kind": "composite", "accelerators": ["cutlass"]})
    assert message == (
        "targets.t.accelerators[0]: 'cutlass' is external codegen for 'cuda', but this "
        "composite has no 'cuda' device (it has no device)"
    )
    # The host is there by default, so a cpu external codegen needs nothing more.
    assert parse_target({"kind": "composite", "accelerators": ["onednn"]}).backends == (
        "onednn", "c")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"kind": "composite", "host": "cuda"},
         "targets.t.host: 'cuda' is a cuda device kind (the host runs on the cpu), so it cannot "
         "be the host"),
        ({"kind": "composite", "host": "cublas"},
         "targets.t.host: 'cublas' is an external codegen for 'cuda', so it cannot be the host"),
        ({"kind": "composite", "device": "c"},
         "targets.t.device: 'c' is a host kind, so it cannot be the device"),
        ({"kind": "composite", "device": "cuda", "accelerators": ["cuda"]},
         "targets.t.accelerators[0]: 'cuda' is a device kind, not an external codegen, so it "
         "cannot be an accelerator"),
        ({"kind": "composite", "host": "x86-onednn"},
         "targets.t.host: the host must be a single host kind, but 'x86-onednn' expands to a "
         "composite of c, onednn"),
    ],
)
def test_each_member_must_fit_its_place(data, expected):
    assert messages(data) == [expected]


def test_nested_composites_are_flattened_to_one_canonical_form():
    nested = parse_target({"kind": "composite", "accelerators": ["cuda-cutlass", "cuda-cublas"]})
    flat = parse_target({"kind": "composite", "device": "cuda",
                         "accelerators": ["cutlass", "cublas"]})
    assert nested.same_as(flat) and nested.digest() == flat.digest()
    assert nested.canonical_json() == flat.canonical_json()
    # Two tags with the same host nest; its equal copies count once.
    fast = parse_target("x86-fast")
    assert fast.backends == ("onednn", "openblas", "c")
    assert fast.host.get("march") == "x86-64-v3"


def test_nested_members_of_one_kind_combine_what_each_writes():
    # The tag writes the host's march, the composite its opt_level: one host with both.
    cpu = parse_target({"kind": "composite", "host": {"kind": "c", "opt_level": 2},
                        "accelerators": ["x86-onednn"]})
    assert (cpu.host.get("opt_level"), cpu.host.get("march")) == (2, "x86-64-v3")
    gpu = parse_target({"kind": "composite", "device": {"kind": "cuda", "arch": "sm_90a"},
                        "accelerators": ["cuda-cutlass"]})
    assert gpu.device is not None and gpu.device.get("arch") == "sm_90a"
    assert gpu.instance("cutlass").get("sm") == 90


def test_members_writing_one_attribute_differently_are_an_error():
    (host,) = messages({"kind": "composite", "host": {"kind": "c", "march": "x86-64-v2"},
                        "accelerators": ["x86-onednn"]})
    assert host == (
        "targets.t.accelerators[0]: this host 'c' differs from the host at targets.t.host in "
        "march (\"x86-64-v2\" there, \"x86-64-v3\" here) (through tag 'x86-onednn')"
    )
    (device,) = messages({"kind": "composite", "device": {"kind": "cuda", "arch": "sm_90a"},
                          "accelerators": [{"tag": "cuda-cutlass", "device": {"arch": "sm_80"}}]})
    assert 'arch ("sm_90a" there, "sm_80" here)' in device


def test_an_accelerator_listed_twice_keeps_its_first_place_or_must_agree():
    twice = parse_target({"kind": "composite", "device": "cuda",
                          "accelerators": ["cublas", "cuda-cutlass", "cuda-cublas"]})
    assert twice.backends == ("cublas", "cutlass", "cuda", "c")
    (message,) = messages({"kind": "composite", "device": "cuda", "accelerators": [
        {"kind": "cutlass", "split_k_slices": [1]}, {"kind": "cutlass", "split_k_slices": [2]}]})
    assert message == ("targets.t.accelerators[1]: accelerator 'cutlass' is listed twice with "
                       "different attributes: split_k_slices ([1] there, [2] here)")


def test_the_non_external_codegen_member_is_its_device_types_primary_target():
    both = parse_target({"kind": "composite", "device": "cuda",
                         "accelerators": ["onednn", "cutlass", "cublas"]})
    assert both.device_types == ("cpu", "cuda")
    assert [m.kind for m in both.targets_for("cuda")] == ["cutlass", "cublas", "cuda"]
    assert [m.kind for m in both.targets_for("cpu")] == ["onednn", "c"]
    assert both.primary("cuda") == both.device
    assert both.primary("cpu") == both.host
    assert both.primary("rocm") is None


def test_external_codegens_inherit_unset_attributes_from_their_host_or_device():
    gpu = parse_target({"kind": "composite", "device": {"kind": "cuda", "arch": "sm_90a"},
                        "accelerators": ["cutlass", {"kind": "cublas", "arch": "sm_80"}]})
    cutlass, cublas = gpu.accelerators
    assert cutlass.get("sm") == 90 and cutlass.get("arch") == "sm_90a"  # sm_90a -> 90
    assert cublas.get("arch") == "sm_80"  # written: kept
    assert "-arch=sm_80" in gpu.toolchain("cublas").cflags
    cpu = parse_target({"tag": "x86-onednn", "host": {"opt_level": 1, "cflags": ["-g"]}})
    onednn = cpu.instance("onednn")
    assert (onednn.get("opt_level"), onednn.get("march"), onednn.get("cflags")) == (
        1, "x86-64-v3", ("-g",))
    assert cpu.toolchain("onednn").cflags[-1] == "-g"


def test_unknown_kinds_keys_and_tags_are_reported_together():
    found = messages({"kind": "composite", "hots": "c", "device": {"kind": "cudaa"},
                      "accelerators": ["cutlas", {"tag": "cuda-cutlas"}]})
    assert sorted(found) == [
        "targets.t.accelerators[0]: unknown target kind or tag 'cutlas'",
        "targets.t.accelerators[1].tag: unknown tag 'cuda-cutlas'",
        "targets.t.device.kind: unknown target kind 'cudaa'",
        "targets.t.hots: unknown key 'hots' in a composite target",
    ]


def test_toolchains_come_from_the_rules_and_the_resolved_attributes(tmp_path):
    # include_dirs a user sets must hold CUTLASS (checked at gen); nvcc takes -idirafter
    # only through the host compiler, which does its preprocessing.
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "cutlass").mkdir(parents=True)
    (a / "cutlass" / "cutlass.h").write_text("")
    gpu = parse_target({"kind": "composite", "device": {"kind": "cuda", "nvcc_flags": ["-G"]},
                        "accelerators": [{"kind": "cutlass", "include_dirs": [str(a), str(b)]}]})
    tc = gpu.toolchain("cutlass")
    assert tc.language == "cuda" and tc.cc == "/usr/local/cuda/bin/nvcc" and tc.pool == "nvcc"
    assert "-DNDEBUG" in tc.cflags and tc.cflags[-3:] == (
        f"-Xcompiler=-idirafter,{a}", f"-Xcompiler=-idirafter,{b}", "-G")
    assert gpu.toolchain("cuda").pool_depth == 1
    # nvcc leaves its temp files when stopped midway: never started before a lookup
    assert not tc.stoppable and gpu.toolchain("c").stoppable


@pytest.mark.parametrize(("accelerators", "openmp"), [
    (["onednn"], True), (["openblas", "onednn"], True), (["openblas"], False), ([], False)])
def test_the_host_threads_on_openmp_beside_an_openmp_library(accelerators, openmp):
    """oneDNN's rules say its library threads with OpenMP; the c host's say what it then adds
    (rules `threads_with`, `thread_runtimes`), so one runtime owns the threads."""
    target = parse_target({"kind": "composite", "host": {"kind": "c", "threads": 2},
                           "accelerators": accelerators})
    host = target.toolchain("c")
    assert ("-DBG_THREADS_OPENMP" in host.cflags) is openmp
    assert ("-fopenmp" in host.cflags and "-fopenmp" in host.ldflags) is openmp
    if accelerators:
        assert "-fopenmp" not in target.toolchain(accelerators[0]).cflags
