"""The examples cross-built for aarch64 from this (x86-64) machine: `file` says ARM aarch64,
the C API's symbols are exported, and each runs under qemu (the host's emulator_for) through
`buildgen run --compare` and matches onnxruntime.

Needs aarch64-linux-gnu-gcc and qemu-aarch64: skipped without them, but failed under CI,
where .ci/run installs both (gcc-aarch64-linux-gnu, qemu-user).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from buildgen.targets import resolve_target
from buildgen.targets.cross import emulator_for

REPO = Path(__file__).resolve().parents[2]
TRIPLE = "aarch64-linux-gnu"
EXAMPLES = yaml.safe_load((REPO / "BUILD.yaml").read_text())["models"]
HOST = {"kind": "c", "triple": TRIPLE}


def _need(program: str, package: str) -> None:
    if shutil.which(program) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{program} is not installed; .ci/run installs {package}")
        pytest.skip(f"{program} is not installed (apt-get install {package})")


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.uname().machine == "aarch64", reason="aarch64 is this machine's"),
]


@pytest.fixture(scope="module")
def arm_build(tmp_path_factory: pytest.TempPathFactory, buildgen_build) -> Path:
    _need(f"{TRIPLE}-gcc", "gcc-aarch64-linux-gnu")
    folder = tmp_path_factory.mktemp("cross")
    manifest = folder / "BUILD.yaml"
    manifest.write_text(yaml.safe_dump({
        "buildgen": 1,
        "targets": {"arm": HOST},
        "models": {name: {"source": str(REPO / e["source"]), "inputs": e["inputs"],
                          "targets": ["arm"]} for name, e in EXAMPLES.items()},
    }))
    buildgen_build(manifest, folder / "build")
    return folder / "build"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_example_is_an_aarch64_library_exporting_its_c_api(arm_build: Path, name: str):
    _need("file", "file")
    lib = arm_build / name / "arm" / f"lib{name}.so"
    described = subprocess.run(["file", "-L", str(lib)], capture_output=True, text=True,
                               check=True).stdout
    assert "ARM aarch64" in described and "shared object" in described, described
    # One compile of the c module: no x86 ISA variants for an aarch64 target.
    assert sorted(p.name for p in (arm_build / name / "arm" / "obj").glob("*.o")) == \
        ["c.o", "model.o", "weights.o"]
    nm = shutil.which(f"{TRIPLE}-nm") or "nm"
    symbols = subprocess.run([nm, "-D", "--defined-only", str(lib)], capture_output=True,
                             text=True, check=True).stdout.split()
    for function in ("create", "run", "destroy", "last_error"):
        assert f"{name}_{function}" in symbols


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_example_runs_under_the_emulator_and_matches_onnxruntime(arm_build: Path,
                                                                      name: str):
    """`buildgen run --compare`: the driver cross-built for the target, run under qemu
    (the host's emulator_for), its outputs against onnxruntime's on this machine."""
    _need("qemu-aarch64", "qemu-user")
    emulator = emulator_for(resolve_target("arm", HOST))
    assert emulator and emulator[0] == "qemu-aarch64"
    folder = arm_build.parent
    done = subprocess.run(
        [sys.executable, "-m", "buildgen", "run", name, "--target", "arm", "--compare",
         "--manifest", str(folder / "BUILD.yaml"), "--build-dir", str(arm_build)],
        capture_output=True, text=True, timeout=600, cwd=folder)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "qemu-aarch64" in done.stdout + done.stderr
    driver = arm_build / name / "arm" / "run" / "driver"
    described = subprocess.run(["file", "-L", str(driver)], capture_output=True, text=True,
                               check=True).stdout
    assert "ARM aarch64" in described, described
