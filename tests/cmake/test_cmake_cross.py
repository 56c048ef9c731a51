"""buildgen_add_models in a cross CMake build (issue 20, item 4).

The models' targets whose host names no triple follow the project's toolchain (`buildgen
cmake --cross-*`, which buildgen_add_models passes when CMAKE_CROSSCOMPILING is set): the
fast tests check what `buildgen cmake` makes of it; the slow one configures
examples/cmake_cross with its aarch64 toolchain file, builds, runs ctest (through
CMAKE_CROSSCOMPILING_EMULATOR, qemu) and compares the application's outputs with
onnxruntime's. It skips without aarch64-linux-gnu-gcc or qemu-aarch64, and fails instead
when CI is set (.ci/run installs them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cmake_helpers import (
    REPO,
    CMakeBuild,
    buildgen_actions,
    c_kernel_sources,
    pip_cmake,
    subprocess_env,
)

from buildgen.cmake.generate import generate_cmake
from buildgen.errors import BuildgenError
from buildgen.targets.cross import ProjectToolchain

TRIPLE = "aarch64-linux-gnu"
EXAMPLE = REPO / "examples" / "cmake_cross"
MODEL = REPO / "examples" / "models" / "mlp.onnx"
EMULATOR = ("qemu-aarch64", "-L", f"/usr/{TRIPLE}")
RTOL, ATOL = 1e-3, 1e-4


def _need(program: str, package: str) -> None:
    if shutil.which(program) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{program} is not installed; .ci/run installs {package}")
        pytest.skip(f"{program} is not installed (apt-get install {package})")


def _project(cc: str = f"/usr/bin/{TRIPLE}-gcc") -> ProjectToolchain:
    return ProjectToolchain(TRIPLE, cc=cc, emulator=EMULATOR,
                            origin=f"the CMake toolchain (CMAKE_C_COMPILER {cc})",
                            leave_out=" (buildgen_add_models(... TARGETS <others>))")


def _manifest(folder: Path, targets: str, used: str = "[cpu]") -> Path:
    path = folder / "BUILD.yaml"
    path.write_text(f"buildgen: 1\ntargets:\n{targets}models:\n  mlp:\n"
                    f"    source: {MODEL}\n    inputs: {{x: [8, 512]}}\n    targets: {used}\n")
    return path


def _host(build: Path, target: str = "cpu") -> dict:
    return json.loads((build / "_targets" / target / "target.json").read_text())["host"]


# -- what `buildgen cmake` makes of the project's toolchain (no compiler runs) -------------

def test_a_target_naming_no_triple_follows_the_project_toolchain(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, "  cpu: {kind: composite, host: {kind: c, opt_level: 2}}\n")
    generate_cmake(manifest, tmp_path / "native")
    native = _host(tmp_path / "native")
    assert native["triple"] is None and native["emulator"] is None

    result = generate_cmake(manifest, tmp_path / "cross", project=_project())
    host = _host(tmp_path / "cross")
    assert host["triple"] == TRIPLE and host["cc"] == f"/usr/bin/{TRIPLE}-gcc"
    assert host["emulator"] == list(EMULATOR) and host["opt_level"] == 2
    # The plan's own compiles (the weights) run the project's compiler, and no x86 ISA
    # variant is left for CMake to compile.
    fragment = (result.fragment_dir / "CMakeLists.txt").read_text()
    weights = (tmp_path / "cross" / "cmake-fragment" / "commands" / "mlp" / "cpu" / "obj"
               / "weights.o.cmd").read_text()
    assert f"/usr/bin/{TRIPLE}-gcc " in weights
    assert "-march=x86-64" not in fragment


def test_a_triple_written_in_the_manifest_is_kept(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, "  cpu: {kind: c, triple: aarch64-linux-gnu, "
                         "cc: /usr/bin/true, mcpu: cortex-a76}\n")
    generate_cmake(manifest, tmp_path / "b", project=_project())
    host = _host(tmp_path / "b")
    assert host["cc"] == "/usr/bin/true" and host["mcpu"] == "cortex-a76"
    assert host["emulator"] is None  # the project's emulator is not the manifest's either


def test_a_backend_that_cannot_cross_is_a_located_configure_error(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, "  cpu:\n    kind: composite\n    host: {kind: c}\n"
                         "    accelerators: [{kind: onednn}]\n  unused: {kind: composite, "
                         "host: c, accelerators: [openblas]}\n")
    with pytest.raises(BuildgenError) as caught:
        generate_cmake(manifest, tmp_path / "b", project=_project())
    text = str(caught.value)
    # Only the target the model uses follows the toolchain: `unused` is not reported.
    assert text.count("error:") == 1, text
    assert "BUILD.yaml:6:" in text and "'onednn' cannot build for the host's triple " \
        f"'{TRIPLE}'" in text and "CMAKE_C_COMPILER" in text
    assert "leave target 'cpu' out of this build (buildgen_add_models(... TARGETS" in text


def test_a_target_of_another_architecture_than_the_project_is_refused(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, "  cpu: {kind: c}\n  rv: {kind: c, triple: "
                         "riscv64-linux-gnu, cc: /usr/bin/true}\n", used="[cpu, rv]")
    for project, builds_for in ((_project(), "builds for aarch64 with the CMake toolchain"),
                                (None, "builds for this machine")):
        with pytest.raises(BuildgenError) as caught:
            generate_cmake(manifest, tmp_path / "b", project=project)
        text = str(caught.value)
        assert "BUILD.yaml:4:" in text and "target 'rv' builds for triple " \
            "'riscv64-linux-gnu' (riscv64)" in text and builds_for in text, text
        assert "TARGETS <others>" in text
    generate_cmake(manifest, tmp_path / "b", targets=["cpu"], project=_project())


# -- examples/cmake_cross, configured with its toolchain file, built, tested under qemu ----

@pytest.fixture
def cross_tools() -> None:
    if os.uname().machine == "aarch64":
        pytest.skip("aarch64 is this machine's")
    _need(f"{TRIPLE}-gcc", "gcc-aarch64-linux-gnu")
    _need("qemu-aarch64", "qemu-user")
    _need("file", "file")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """examples/cmake_cross beside the model and the C program, as in the repository."""
    examples = tmp_path / "examples"
    shutil.copytree(EXAMPLE, examples / "cmake_cross", ignore=shutil.ignore_patterns("build*"))
    (examples / "models").mkdir()
    shutil.copy(MODEL, examples / "models" / MODEL.name)
    shutil.copy(REPO / "examples" / "run_mlp.c", examples / "run_mlp.c")
    return examples / "cmake_cross"


def commands_of(build: CMakeBuild) -> list[dict[str, str]]:
    commands: list[dict[str, str]] = json.loads(
        (build.build / "compile_commands.json").read_text())
    return commands


def _outputs(text: str) -> dict[str, np.ndarray]:
    lines = text.splitlines()
    return {head.split()[0]: np.array([float(v) for v in values.split()], dtype=np.float32)
            for head, values in zip(lines[::2], lines[1::2], strict=True)}


@pytest.mark.slow
@pytest.mark.skipif(pip_cmake() is None, reason="no cmake")
def test_the_cross_example_builds_for_aarch64_and_passes_ctest_under_qemu(
    cross_tools: None, project: Path, tmp_path: Path
) -> None:
    cmake = pip_cmake()
    assert cmake is not None
    build = CMakeBuild(cmake, "Ninja", project, tmp_path / "build")
    build.configure(f"-DCMAKE_TOOLCHAIN_FILE={project / 'aarch64-linux-gnu.cmake'}",
                    "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    events = build.events()
    assert "CC mlp/cpu weights.o" in buildgen_actions(events)
    # Two compiles of the c module and of each shared kernels source, the aarch64 levels
    # (NEON, 256-bit SVE), and no x86 ones.
    compiled = sorted(e.rsplit("/", 1)[-1] for e in events if e.startswith("Building "))
    per_level = [*(f"{s}.o" for s in c_kernel_sources()), "c.c.o"]
    assert compiled == sorted([*per_level, *per_level, "model.c.o", "run_mlp.c.o",
                               "run_mlp.c.o"])
    levels = [c["command"] for c in commands_of(build) if c["file"].endswith("/c.c")]
    assert sorted(" ".join(f for f in cmd.split() if f.startswith("-m")) for cmd in levels) == \
        ["-march=armv8-a", "-march=armv8.2-a+sve -msve-vector-bits=256"]
    commands = commands_of(build)
    assert all(f"{TRIPLE}-gcc" in c["command"] for c in commands)

    for program in ("mlp_app", "mlp_app_shared", "buildgen/mlp/cpu/libmlp.so"):
        described = subprocess.run(["file", "-L", str(build.build / program)],
                                   capture_output=True, text=True, check=True).stdout
        assert "ARM aarch64" in described, described

    ctest = Path(cmake).with_name("ctest")
    done = subprocess.run([str(ctest), "--test-dir", str(build.build), "--output-on-failure",
                           "-V"], capture_output=True, text=True, env=subprocess_env(),
                          timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "qemu-aarch64" in done.stdout  # ctest ran the apps through the emulator
    assert "100% tests passed" in done.stdout

    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    x = (((np.arange(8 * 512) % 17) - 8) / 8).astype(np.float32).reshape(8, 512)
    names = [o.name for o in session.get_outputs()]
    expected = dict(zip(names, session.run(None, {session.get_inputs()[0].name: x}),
                        strict=True))
    for app in ("mlp_app", "mlp_app_shared"):
        ran = subprocess.run([*EMULATOR, str(build.build / app)], capture_output=True,
                             text=True, check=True, timeout=300).stdout
        got = _outputs(ran)
        assert sorted(got) == sorted(expected)
        for name, value in expected.items():
            np.testing.assert_allclose(got[name], value.ravel(), rtol=RTOL, atol=ATOL,
                                       err_msg=f"{app}: {name}")
    assert build.events() == []  # nothing changed: nothing runs
