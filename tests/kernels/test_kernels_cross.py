"""The GEMM and convolution kernels on the architectures ctypes cannot load here: a
self-checking program (gemm_selfcheck.c, which includes harness.c) cross-compiled with the
flags the `c` host uses and run under qemu, plus the same program natively at each width
the kernels pick between (the 8-wide micro-kernel with AVX or 256-bit SVE, the 4-wide one
with NEON or SSE).

The aarch64 micro-kernel is also checked for what it was written for: its loop keeps the
4 x 24 tile in registers (`fmla` by element, no stack traffic). That check reads the
compiler's output, so it pins Debian's aarch64-linux-gnu-gcc 12 behaviour CI installs.

Needs `<triple>-gcc` and `qemu-<arch>`: skipped without them, but failed under CI, where
.ci/run installs them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from disassembly import function_lines, loops

from buildgen.resources import include_dir

HERE = Path(__file__).parent
SELFCHECK = HERE / "gemm_selfcheck.c"
FLAGS = ("-std=c11", "-pthread", "-Wall", "-Wextra", "-Werror", "-fno-math-errno")

# name: (compiler, package, flags, emulator)
BUILDS = {
    "native-sse": ("gcc", "gcc", ("-O3", "-march=x86-64-v2"), ()),
    "native-avx2": ("gcc", "gcc", ("-O3", "-march=x86-64-v3"), ()),
    "aarch64-O3": ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu", ("-O3",),
                   ("qemu-aarch64",)),
    "aarch64-O0": ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu", ("-O0",),
                   ("qemu-aarch64",)),
    # the 8-wide kernels in one SVE register (the armv8.2-a+sve256 level), on a 256-bit CPU
    "aarch64-sve256": ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu",
                       ("-O3", "-march=armv8.2-a+sve", "-msve-vector-bits=256"),
                       ("qemu-aarch64", "-cpu", "max,sve256=on")),
    "riscv64-O2": ("riscv64-linux-gnu-gcc", "gcc-riscv64-linux-gnu", ("-O2",),
                   ("qemu-riscv64",)),
}


def _need(program: str, package: str) -> None:
    if shutil.which(program) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{program} is not installed; .ci/run installs {package}")
        pytest.skip(f"{program} is not installed (apt-get install {package})")


def _host_runs(march: str) -> bool:
    if os.uname().machine != "x86_64":
        return False
    flags = Path("/proc/cpuinfo").read_text()
    return march != "-march=x86-64-v3" or ("avx2" in flags and " fma" in flags)


def _compile(name: str, out: Path, *, obj: bool = False, src: Path = SELFCHECK) -> None:
    cc, package, flags, emulator = BUILDS[name]
    _need(cc, package)
    for program in emulator[:1]:
        _need(program, "qemu-user")
    # Static: qemu then needs no target libc (-L) to start the program.
    link = ("-c",) if obj else ("-static", "-lm")
    cmd = [cc, *FLAGS, *flags, f"-I{include_dir()}", f"-I{HERE}", str(src), "-o", str(out),
           *link]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_gemm_and_conv_match_a_reference(name: str, tmp_path: Path) -> None:
    _, _, flags, emulator = BUILDS[name]
    if not emulator and not _host_runs(flags[-1]):
        pytest.skip(f"this CPU does not run {flags[-1]}")
    exe = tmp_path / "selfcheck"
    _compile(name, exe)
    proc = subprocess.run([*emulator, str(exe)], capture_output=True, text=True, check=False,
                          timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


# build -> (the multiply-add of the k loop, how many per tile width): NEON multiplies each
# 4-wide B vector by one A lane (fmla by element), SVE a whole 8-wide vector by a broadcast
# A (ld1rw) in one predicated fmla.
LOOP_SHAPES = {
    "aarch64-O3": (r"fmla\s+v\d+\.4s, v\d+\.4s, v\d+\.s\[", {"full": 24, "w2": 16, "w1": 8}),
    "aarch64-sve256": (r"fmla\s+z\d+\.s, p\d/m", {"full": 12, "w2": 8, "w1": 4}),
}


@pytest.mark.parametrize("name", sorted(LOOP_SHAPES))
def test_aarch64_micro_kernel_keeps_the_tile_in_registers(name: str, tmp_path: Path) -> None:
    _need("aarch64-linux-gnu-objdump", "binutils-aarch64-linux-gnu")
    obj = tmp_path / "gemm.o"
    _compile(name, obj, obj=True, src=include_dir() / "bg_kernels_gemm.c")
    disassembly = subprocess.run(["aarch64-linux-gnu-objdump", "-d", str(obj)],
                                 capture_output=True, text=True, check=True).stdout
    pattern, counts = LOOP_SHAPES[name]
    for width, fmlas in counts.items():
        function = f"bg__ukernel_{width}"
        # The k loop comes first: the first backward branch whose body holds multiply-adds
        # (the epilogue's activations, after it, have loops of their own).
        loop = next((loop for loop in loops(function_lines(disassembly, function))
                     if any("fmla" in line for line in loop)), [])
        assert len([line for line in loop if re.search(pattern, line)]) == fmlas, "\n".join(loop)
        assert not any("[sp" in line for line in loop), "\n".join(loop)
        # loads of A and B, the multiply-adds, pointer steps and the branch: nothing else
        assert len(loop) <= fmlas + 12, "\n".join(loop)
