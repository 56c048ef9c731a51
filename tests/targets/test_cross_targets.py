"""Cross targets: the c host's `triple`, `sysroot` and `emulator`, what they do to the
toolchain, the combinations rejected (a native-only external codegen, a missing compiler),
the board tags, and `emulator_for`."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from buildgen.errors import BuildgenError
from buildgen.targets import cross as cross_module
from buildgen.targets import resolve_target, resolve_targets
from buildgen.targets.cross import emulator_for, host_triple

ARM = "aarch64-linux-gnu"
RISCV = "riscv64-linux-gnu"
X86_MACHINE = os.uname().machine == "x86_64"


def _toolchain(**host):
    return resolve_target("t", {"kind": "c", **host}).toolchain("c")


def test_a_triple_picks_its_gcc_in_the_canonical_target():
    target = resolve_target("t", {"kind": "c", "triple": ARM})
    assert target.host.get("cc") == f"{ARM}-gcc"
    assert host_triple(target) == ARM
    assert resolve_target("t", {"kind": "c", "triple": RISCV}).host.get("cc") == f"{RISCV}-gcc"
    # A compiler the user names is kept.
    assert _toolchain(triple=ARM, cc="/opt/arm/bin/gcc").cc == "/opt/arm/bin/gcc"
    assert resolve_target("t", {"kind": "c"}).host.get("cc") == "cc"


def test_gcc_takes_no_target_flag_and_sysroot_goes_to_compile_and_link():
    tc = _toolchain(triple=ARM)
    assert not [f for f in (*tc.cflags, *tc.ldflags) if f.startswith(("--target", "--sysroot"))]
    tc = _toolchain(triple=ARM, sysroot="/srv/arm")
    assert "--sysroot=/srv/arm" in tc.cflags and "--sysroot=/srv/arm" in tc.ldflags


@pytest.mark.parametrize("cc", ["clang", "clang-17", "/usr/lib/llvm-17/bin/clang"])
def test_clang_is_told_the_triple_on_compile_and_link(cc):
    tc = _toolchain(triple=ARM, cc=cc, sysroot="/usr/aarch64-linux-gnu")
    assert tc.cc == cc
    for flags in (tc.cflags, tc.ldflags):
        assert flags[0] == f"--target={ARM}"
        assert "--sysroot=/usr/aarch64-linux-gnu" in flags
    # Without a triple, clang builds for the build machine: no --target.
    assert not [f for f in _toolchain(cc=cc).cflags if f.startswith("--target")]


def test_aarch64_gets_a_neon_and_a_256_bit_sve_compile_and_no_x86_flags():
    tc = _toolchain(triple=ARM)
    assert [(v.level, v.cflags) for v in tc.variants] == [
        ("armv8-a", ("-march=armv8-a",)),
        ("armv8.2-a+sve256", ("-march=armv8.2-a+sve", "-msve-vector-bits=256")),
    ]
    assert not [f for f in tc.cflags if "x86" in f or f.startswith("-m64")]


def test_riscv64_gets_one_compile_and_no_x86_flags():
    tc = _toolchain(triple=RISCV)
    assert tc.variants == ()
    assert not [f for f in tc.cflags if "x86" in f or f.startswith("-m64")]


def test_mcpu_pins_one_compile_as_march_does():
    tc = _toolchain(triple=ARM, mcpu="cortex-a76")
    assert tc.variants == () and "-mcpu=cortex-a76" in tc.cflags
    assert tc.pinned_isa == ""  # a CPU, not a level create could check


def test_march_and_mcpu_pass_through():
    tc = _toolchain(triple=ARM, march="armv8.2-a+dotprod", mcpu="neoverse-n1")
    assert "-march=armv8.2-a+dotprod" in tc.cflags and "-mcpu=neoverse-n1" in tc.cflags
    assert tc.variants == () and tc.pinned_isa == "armv8.2-a+dotprod"


@pytest.mark.skipif(not X86_MACHINE, reason="compares with the x86-64 build machine's levels")
def test_the_native_triple_keeps_the_build_machines_levels():
    native = _toolchain(triple="x86_64-linux-gnu")
    assert [v.level for v in native.variants] == [v.level for v in _toolchain().variants]
    assert native.cc == "x86_64-linux-gnu-gcc"


def test_isa_levels_of_another_architecture_are_a_located_error():
    with pytest.raises(BuildgenError) as info:
        resolve_target("t", {"kind": "c", "triple": ARM, "isa_levels": ["x86-64", "armv8-a"]})
    assert ("isa_levels: x86-64 is not a level of the host's triple 'aarch64-linux-gnu'"
            in info.value.render())
    assert "it has armv8-a, armv8.2-a+sve256" in info.value.render()
    with pytest.raises(BuildgenError) as info:
        resolve_target("t", {"kind": "c", "triple": RISCV, "isa_levels": ["armv8-a"]})
    assert "it has none (one compile)" in info.value.render()


@pytest.mark.skipif(not X86_MACHINE, reason="an x86-64 build machine's levels")
def test_isa_levels_of_another_architecture_without_a_triple_are_an_error():
    with pytest.raises(BuildgenError) as info:
        resolve_target("t", {"kind": "c", "isa_levels": ["armv8-a"]})
    assert "armv8-a is not a level of the host's architecture (x86_64" in info.value.render()


def test_aarch64_isa_levels_can_be_chosen():
    tc = _toolchain(triple=ARM, isa_levels=["armv8-a"])
    assert [v.level for v in tc.variants] == ["armv8-a"]


@pytest.mark.skipif(not X86_MACHINE, reason="the wheels are native on an x86-64 machine")
@pytest.mark.parametrize("kind", ["onednn", "openblas"])
def test_native_only_external_codegens_are_rejected_where_written(manifest, errors, kind):
    m = manifest(f"""
        buildgen: 1
        targets:
          arm: {{kind: composite, host: {{kind: c, triple: {ARM}}}, accelerators: [{kind}]}}
        """)
    (message,) = errors(lambda: resolve_targets(m))
    assert message.startswith(f"3:85: targets.arm.accelerators[0]: '{kind}' cannot build for "
                              f"the host's triple '{ARM}' (aarch64; this machine is x86_64)")
    with pytest.raises(BuildgenError) as info:
        resolve_targets(m)
    assert "drop" in info.value.render() and "{kind: c, triple: aarch64-linux-gnu}" in \
        info.value.render()


@pytest.mark.skipif(not X86_MACHINE, reason="aarch64 is native on an aarch64 machine")
def test_cuda_for_a_jetson_takes_the_host_triple_and_nvcc_its_g_plus_plus(tmp_path):
    runtime = tmp_path / "cu13"
    (runtime / "include").mkdir(parents=True)
    (runtime / "include" / "cuda_runtime_api.h").write_text("")
    (runtime / "lib").mkdir()
    (runtime / "lib" / "libcudart.so.13").write_text("")
    target = resolve_target("t", {"kind": "composite", "host": {"kind": "c", "triple": ARM},
                                  "device": {"kind": "cuda", "target_cuda": str(runtime)}})
    assert target.device is not None
    assert dict(target.device.attrs)["host_triple"] == ARM
    flags = target.toolchain("cuda").cflags
    assert f"-ccbin={ARM}-g++" in flags
    assert f"-I{runtime / 'include'}" in flags  # the target's runtime, before nvcc's own
    assert flags.index(f"-I{runtime / 'include'}") < next(
        i for i, f in enumerate(flags) if f.startswith("-I") and "cu13" not in f)
    assert f"-L{runtime / 'lib'}" in target.toolchain("cuda").ldflags


@pytest.mark.skipif(not X86_MACHINE, reason="aarch64 is native on an aarch64 machine")
def test_cuda_for_a_jetson_without_the_targets_runtime_says_where_to_get_it():
    target = resolve_target("t", {"kind": "composite", "host": {"kind": "c", "triple": ARM},
                                  "device": {"kind": "cuda"}})
    with pytest.raises(BuildgenError) as info:
        target.toolchain("cuda")
    text = info.value.render()
    assert "needs that architecture's CUDA runtime" in text
    assert "target_cuda" in text and "manylinux2014_aarch64" in text


@pytest.mark.skipif(not X86_MACHINE, reason="aarch64 is native on an aarch64 machine")
@pytest.mark.parametrize("kind", ["cublas", "cudnn", "cutlass"])
def test_the_cuda_external_codegens_are_rejected_for_a_jetson(kind):
    with pytest.raises(BuildgenError) as info:
        resolve_target("t", {"kind": "composite", "host": {"kind": "c", "triple": ARM},
                             "device": {"kind": "cuda"}, "accelerators": [{"kind": kind}]})
    assert f"'{kind}' cannot build for the host's triple" in info.value.render()


def test_a_native_triple_keeps_every_external_codegen():
    machine = cross_module.build_arch()
    target = resolve_target("t", {"kind": "composite",
                                  "host": {"kind": "c", "triple": f"{machine}-linux-gnu"},
                                  "accelerators": ["onednn", "openblas"]})
    assert target.backends == ("onednn", "openblas", "c")


def test_a_missing_cross_compiler_is_a_located_gen_error_with_the_install_hint(
        manifest, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no compiler at all
    m = manifest(f"""
        buildgen: 1
        targets:
          arm: {{kind: composite, host: {{kind: c, triple: {RISCV}}}}}
        models:
          m: {{source: m.onnx, targets: [arm]}}
        """)
    with pytest.raises(BuildgenError) as info:
        resolve_targets(m)
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.location is not None
    assert (diagnostic.location.line, diagnostic.location.column) == (3, 50)
    assert f"'{RISCV}-gcc', which is not installed" in diagnostic.message
    assert diagnostic.hint is not None
    assert "apt-get install gcc-riscv64-linux-gnu" in diagnostic.hint


def test_emulator_is_run_only_never_a_compile_or_link_flag():
    plain = _toolchain(triple=ARM)
    emulated = _toolchain(triple=ARM, emulator=["qemu-aarch64", "-L", "/x"])
    assert emulated == plain
    target = resolve_target("t", {"kind": "c", "triple": ARM, "emulator": ["qemu-aarch64"]})
    assert target.codegen_options("c") == resolve_target(
        "t", {"kind": "c", "triple": ARM}).codegen_options("c")


def test_emulator_for(monkeypatch):
    assert emulator_for(resolve_target("t", {"kind": "c"})) == ()
    native = f"{cross_module.build_arch()}-linux-gnu"
    assert emulator_for(resolve_target("t", {"kind": "c", "triple": native})) == ()
    written = ["qemu-aarch64", "-L", "/opt/sysroot"]
    assert emulator_for(resolve_target("t", {"kind": "c", "emulator": written})) == \
        tuple(written)
    assert emulator_for(resolve_target("t", {"kind": "c", "triple": ARM, "emulator": []})) == ()
    if cross_module.build_arch() == "aarch64":
        return
    monkeypatch.setattr(cross_module.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(cross_module.os.path, "isdir", lambda path: path == f"/usr/{ARM}")
    arm = resolve_target("t", {"kind": "c", "triple": ARM})
    assert emulator_for(arm) == ("qemu-aarch64", "-L", f"/usr/{ARM}")
    monkeypatch.setattr(cross_module.os.path, "isdir", lambda path: True)
    rooted = resolve_target("t", {"kind": "c", "triple": ARM, "sysroot": "/srv/arm"})
    assert emulator_for(rooted) == ("qemu-aarch64", "-L", "/srv/arm")
    monkeypatch.setattr(cross_module.shutil, "which", lambda name: None)
    assert emulator_for(arm) is None


BOARDS = {"rpi4": "cortex-a72", "rpi5": "cortex-a76", "graviton3": "neoverse-v1",
          "jetson-orin-cpu": "cortex-a78ae"}


@pytest.mark.parametrize(("tag", "mcpu"), sorted(BOARDS.items()))
def test_board_tags_are_aarch64_c_hosts_tuned_for_their_cpu(tag, mcpu):
    target = resolve_target("t", tag)
    assert (target.host.kind, target.host.get("triple"), target.host.get("mcpu")) == \
        ("c", ARM, mcpu)
    assert target.accelerators == () and target.device is None
    assert f"-mcpu={mcpu}" in target.toolchain("c").cflags


# CI (.ci/run installs gcc-aarch64-linux-gnu) sets CI: there a missing compiler fails.
@pytest.mark.skipif(shutil.which(f"{ARM}-gcc") is None and not os.environ.get("CI"),
                    reason=f"{ARM}-gcc is not installed (apt-get install gcc-aarch64-linux-gnu)")
def test_the_cross_gcc_accepts_every_board_tags_mcpu():
    for mcpu in BOARDS.values():
        done = subprocess.run([f"{ARM}-gcc", f"-mcpu={mcpu}", "-E", "-"], input="",
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
