"""The examples cross-built from this (x86-64) machine for aarch64 and riscv64: `file` says
what was built, the C API's symbols are exported, and they run under qemu (the host's
emulator_for) through `buildgen run --compare` and match onnxruntime.

aarch64 builds and runs all three examples. riscv64, to keep CI time down, builds and runs
the MLP only: what differs between the two is the compiler and the headers' per-architecture
lines, which every model compiles; it runs on two threads, so the pool's spin-wait hint
(bg_threads.h's bg__cpu_relax) runs too.

Needs `<triple>-gcc` and `qemu-<arch>`: skipped without them, but failed under CI, where
.ci/run installs them (gcc-aarch64-linux-gnu, gcc-riscv64-linux-gnu, qemu-user).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from buildgen.targets import resolve_target
from buildgen.targets.cross import emulator_for

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = yaml.safe_load((REPO / "BUILD.yaml").read_text())["models"]


@dataclass(frozen=True)
class Arch:
    triple: str
    package: str        # Debian's package of `<triple>-gcc`
    described: str      # what `file` says of the library
    examples: tuple[str, ...]
    modules: tuple[str, ...]  # the c module's objects: one per ISA level, or one
    threads: int = 1

    @property
    def name(self) -> str:
        return self.triple.split("-", 1)[0]

    @property
    def host(self) -> dict[str, str | int]:
        return {"kind": "c", "triple": self.triple, "threads": self.threads}


ARCHES = {a.name: a for a in (
    Arch("aarch64-linux-gnu", "gcc-aarch64-linux-gnu", "ARM aarch64", tuple(sorted(EXAMPLES)),
         ("c.armv8-a.o", "c.armv8.2-a+sve256.o")),
    Arch("riscv64-linux-gnu", "gcc-riscv64-linux-gnu", "RISC-V", ("mlp",), ("c.o",), threads=2),
)}
CASES = [pytest.param(arch, name, id=f"{arch}-{name}")
         for arch in ARCHES for name in ARCHES[arch].examples]


def _need(program: str, package: str) -> None:
    if shutil.which(program) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{program} is not installed; .ci/run installs {package}")
        pytest.skip(f"{program} is not installed (apt-get install {package})")


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cross_build(tmp_path_factory: pytest.TempPathFactory,
                buildgen_build) -> Callable[[str], Path]:
    """`cross_build(arch)`: the build folder of the arch's examples (built on first use,
    target name `arch`), for the tests of that arch only."""
    built: dict[str, Path] = {}

    def build(name: str) -> Path:
        arch = ARCHES[name]
        if os.uname().machine == name:
            pytest.skip(f"{name} is this machine's")
        _need(f"{arch.triple}-gcc", arch.package)
        if name not in built:
            folder = tmp_path_factory.mktemp(f"cross-{name}")
            manifest = folder / "BUILD.yaml"
            manifest.write_text(yaml.safe_dump({
                "buildgen": 1,
                "targets": {name: arch.host},
                "models": {m: {"source": str(REPO / EXAMPLES[m]["source"]),
                               "inputs": EXAMPLES[m]["inputs"], "targets": [name]}
                           for m in arch.examples},
            }))
            buildgen_build(manifest, folder / "build")
            built[name] = folder / "build"
        return built[name]

    return build


def _file(path: Path) -> str:
    _need("file", "file")
    return subprocess.run(["file", "-L", str(path)], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.parametrize(("arch", "name"), CASES)
def test_each_example_is_a_library_of_the_triple_exporting_its_c_api(
        cross_build, arch: str, name: str):
    build = cross_build(arch)
    lib = build / name / arch / f"lib{name}.so"
    described = _file(lib)
    assert ARCHES[arch].described in described and "shared object" in described, described
    # The c module's compiles are the architecture's levels, no x86 ones.
    assert sorted(p.name for p in (build / name / arch / "obj").glob("*.o")) == \
        sorted([*ARCHES[arch].modules, "model.o", "weights.o"])
    nm = shutil.which(f"{ARCHES[arch].triple}-nm") or "nm"
    symbols = subprocess.run([nm, "-D", "--defined-only", str(lib)], capture_output=True,
                             text=True, check=True).stdout.split()
    for function in ("create", "run", "destroy", "last_error"):
        assert f"{name}_{function}" in symbols


@pytest.mark.parametrize(("arch", "name"), CASES)
def test_each_example_runs_under_the_emulator_and_matches_onnxruntime(
        cross_build, repo_env: dict[str, str], arch: str, name: str):
    """`buildgen run --compare`: the driver cross-built for the target, run under qemu
    (the host's emulator_for: qemu-<arch> -L /usr/<triple>), its outputs against onnxruntime's on
    this machine."""
    build = cross_build(arch)
    _need(f"qemu-{arch}", "qemu-user")
    emulator = emulator_for(resolve_target(arch, ARCHES[arch].host))
    assert emulator and emulator[0] == f"qemu-{arch}"
    folder = build.parent
    done = subprocess.run(
        [sys.executable, "-m", "buildgen", "run", name, "--target", arch, "--compare",
         "--manifest", str(folder / "BUILD.yaml"), "--build-dir", str(build)],
        capture_output=True, text=True, timeout=600, cwd=folder, env=repo_env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"qemu-{arch}" in done.stdout + done.stderr
    driver = _file(build / name / arch / "run" / "driver")
    assert ARCHES[arch].described in driver, driver


# qemu's CPU (QEMU_CPU, read by qemu-user) -> the level create picks: 256-bit SVE only where
# the vector length is 256 bits (qemu's `max` CPU defaults to 512 for user programs).
SVE_CASES = {"max,sve256=on": "armv8.2-a+sve256", "max": "armv8-a", "cortex-a72": "armv8-a"}


@pytest.mark.parametrize("name", ["cnn", "encoder"])
@pytest.mark.parametrize("cpu", sorted(SVE_CASES))
def test_aarch64_create_picks_sve_only_at_256_bits_and_each_level_matches(
        cross_build, repo_env: dict[str, str], cpu: str, name: str):
    """The aarch64 library holds a NEON and a 256-bit SVE build of its c module; create
    picks by the CPU's SVE vector length, and each level matches onnxruntime."""
    build = cross_build("aarch64")
    _need("qemu-aarch64", "qemu-user")
    folder = build.parent
    done = subprocess.run(
        [sys.executable, "-m", "buildgen", "run", name, "--target", "aarch64", "--compare",
         "--manifest", str(folder / "BUILD.yaml"), "--build-dir", str(build)],
        capture_output=True, text=True, timeout=600, cwd=folder,
        env={**repo_env, "QEMU_CPU": cpu})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"; isa {SVE_CASES[cpu]}\n" in done.stdout, done.stdout


def _aarch64_cuda_runtime(folder: Path) -> Path:
    """The aarch64 CUDA runtime: PyPI's nvidia-cuda-runtime wheel for aarch64, downloaded
    (once per machine) and unpacked; its nvidia/cu13 folder is a target_cuda."""
    cache = Path.home() / ".cache" / "buildgen-tests" / "aarch64-cudart"
    found = sorted(cache.glob("nvidia/cu*/include/cuda_runtime_api.h"))
    if not found:
        wheels = folder / "wheels"
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
             "--platform", "manylinux2014_aarch64", "-d", str(wheels), "nvidia-cuda-runtime"],
            capture_output=True, text=True, check=False, timeout=600)
        if done.returncode != 0:
            message = f"cannot download the aarch64 CUDA runtime wheel: {done.stderr[-500:]}"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        import zipfile

        for wheel in wheels.glob("*.whl"):
            zipfile.ZipFile(wheel).extractall(cache)
        found = sorted(cache.glob("nvidia/cu*/include/cuda_runtime_api.h"))
    return found[-1].parent.parent


@pytest.mark.skipif(os.uname().machine == "aarch64", reason="aarch64 is this machine's")
def test_cuda_for_a_jetson_builds_for_aarch64_and_is_compile_only(
        tmp_path: Path, buildgen_build, repo_env: dict[str, str]) -> None:
    """The MLP for a Jetson (aarch64 host, cuda device at sm_87): nvcc compiles its host
    code with aarch64-linux-gnu-g++ against the aarch64 runtime; `buildgen run` refuses."""
    _need("aarch64-linux-gnu-g++", "g++-aarch64-linux-gnu")
    _need("nvcc", "the CUDA toolkit (pip install 'buildgen[cuda]')")
    runtime = _aarch64_cuda_runtime(tmp_path)
    manifest = tmp_path / "BUILD.yaml"
    manifest.write_text(yaml.safe_dump({
        "buildgen": 1,
        "targets": {"jetson": {"kind": "composite",
                               "host": {"kind": "c", "triple": "aarch64-linux-gnu"},
                               "device": {"kind": "cuda", "arch": "sm_87",
                                          "target_cuda": str(runtime)}}},
        "models": {"mlp": {"source": str(REPO / EXAMPLES["mlp"]["source"]),
                           "inputs": EXAMPLES["mlp"]["inputs"], "targets": ["jetson"]}},
    }))
    build = tmp_path / "build"
    buildgen_build(manifest, build)
    folder = build / "mlp" / "jetson"
    for built in (folder / "libmlp.so", folder / "obj" / "cuda.o"):
        assert "ARM aarch64" in _file(built), built
    done = subprocess.run(
        [sys.executable, "-m", "buildgen", "run", "mlp", "--target", "jetson",
         "--manifest", str(manifest), "--build-dir", str(build)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env=repo_env)
    assert done.returncode != 0
    assert "compile-only here: its cuda device code runs on the GPU" in done.stderr
