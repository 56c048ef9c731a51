"""examples/cmake built by CMake itself, the way a user's project builds it.

With CMake's Ninja and Makefiles generators (the PyPI cmake, and Debian's 3.25 when
installed): configure, build, run the application (static and shared) against onnxruntime,
check compile_commands.json; a rebuild with no change runs nothing; changing the c host's
opt_level in the manifest re-runs configure, recompiles the model's objects only and relinks
the applications. Then `cmake --install` and a second project that finds the installed model
through the exported targets file.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cmake_helpers import (
    REPO,
    CMakeBuild,
    buildgen_actions,
    c_kernel_objects,
    c_kernel_sources,
    c_objects,
    c_variant_levels,
    cmake_params,
    pip_cmake,
)

pytestmark = pytest.mark.slow

EXAMPLE = REPO / "examples" / "cmake"
MODEL = REPO / "examples" / "models" / "mlp.onnx"
RTOL, ATOL = 1e-3, 1e-4
GENERATION = ["IMPORT mlp", "PARTITION mlp/cpu", "CODEGEN c mlp/cpu", "EXECUTOR mlp/cpu",
              "REPORT mlp/cpu"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of examples/cmake beside a copy of the model, as in the repository."""
    source = tmp_path / "examples" / "cmake"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build*"))
    (tmp_path / "examples" / "models").mkdir()
    shutil.copy(MODEL, tmp_path / "examples" / "models" / MODEL.name)
    return source


@pytest.fixture(scope="module")
def reference() -> dict[str, np.ndarray]:
    """onnxruntime's outputs for the input main.cpp builds: x[i] = ((i % 17) - 8) / 8."""
    ort = pytest.importorskip("onnxruntime")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(str(MODEL), opts, providers=["CPUExecutionProvider"])
    x = (((np.arange(8 * 512) % 17) - 8) / 8).astype(np.float32).reshape(8, 512)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {session.get_inputs()[0].name: x}), strict=True))


def _check_output(program: Path, reference: dict[str, np.ndarray]) -> None:
    out = subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    got = {}
    for head, values in zip(lines[::2], lines[1::2], strict=True):
        name, count = head.split()
        got[name] = np.array([float(v) for v in values.split()], dtype=np.float32)
        assert len(got[name]) == int(count)
    assert sorted(got) == sorted(reference)
    for name, expected in reference.items():
        np.testing.assert_allclose(got[name], expected.ravel(), rtol=RTOL, atol=ATOL,
                                   err_msg=name)


def _compiled(events: list[str]) -> list[str]:
    """Object files CMake compiled, by file name."""
    return sorted(e.rsplit("/", 1)[-1] for e in events if e.startswith("Building "))


def _linked(events: list[str]) -> list[str]:
    return sorted(e.rsplit("/", 1)[-1].split()[-1] for e in events if e.startswith("Linking "))


@pytest.mark.parametrize(("cmake", "generator"), cmake_params())
def test_example_builds_runs_and_rebuilds_only_what_changed(
    project: Path, tmp_path: Path, cmake: str, generator: str, reference
) -> None:
    build = CMakeBuild(cmake, generator, project, tmp_path / "build")
    build.configure("-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    first = build.events()
    assert sorted(buildgen_actions(first)) == sorted([*GENERATION, "CC mlp/cpu weights.o"])
    # The c host's shared kernels are compiled once (_shared/), like the model's sources.
    assert _compiled(first) == sorted([*c_kernel_objects(), *c_objects(), "main.cpp.o",
                                       "main.cpp.o", "model.c.o"])
    for app in ("mlp_app", "mlp_app_shared"):
        _check_output(build.build / app, reference)

    # The generated C sources are compiled by CMake, with the target's flags.
    commands = json.loads((build.build / "compile_commands.json").read_text())
    generated = {Path(c["file"]).name: c["command"] for c in commands
                 if "buildgen" in Path(c["file"]).parts}
    assert sorted(generated) == [*c_kernel_sources(), "c.c", "model.c"]
    for command in generated.values():
        assert "-std=c11" in command and "-O3" in command and "-fvisibility=hidden" in command

    assert build.events() == []  # nothing changed: nothing runs

    manifest = project / "BUILD.yaml"
    manifest.write_text(manifest.read_text().replace("opt_level: 3", "opt_level: 2"))
    second = build.events()
    # No stage re-runs (opt_level changes no option file a stage reads), nor the assembly of
    # weights.S (its command keeps only the flags data needs); the model's objects are
    # rebuilt with -O2 (and the shared kernels, for a toolchain of their own), the
    # application's own object is not; everything that links the model relinks.
    assert buildgen_actions(second) == []
    assert _compiled(second) == sorted([*c_kernel_objects(), *c_objects(), "model.c.o"])
    assert _linked(second) == ["libc_kernels.a", "libmlp.a", "libmlp.so", "mlp_app",
                              "mlp_app_shared"]
    commands = json.loads((build.build / "compile_commands.json").read_text())
    assert all("-O2" in c["command"] for c in commands if c["file"].endswith("model.c"))
    _check_output(build.build / "mlp_app", reference)
    assert build.events() == []


@pytest.mark.skipif(pip_cmake() is None, reason="no cmake")
def test_install_gives_another_project_the_same_targets(
    project: Path, tmp_path: Path, reference
) -> None:
    cmake = pip_cmake()
    assert cmake is not None
    build = CMakeBuild(cmake, "Ninja", project, tmp_path / "build")
    build.configure()
    build.build_all()
    prefix = tmp_path / "prefix"
    build._run([cmake, "--install", str(build.build), "--prefix", str(prefix)])
    installed = {p.relative_to(prefix).as_posix() for p in prefix.rglob("*") if p.is_file()}
    libdir = next(p for p in installed if p.endswith("/libmlp.a")).rsplit("/", 1)[0]
    assert {"bin/mlp_app", "include/mlp.h", f"{libdir}/libmlp.a", f"{libdir}/libmlp.so",
            f"{libdir}/cmake/mlp_model/mlp_modelConfig.cmake"} <= installed
    _check_output(prefix / "bin" / "mlp_app", reference)

    consumer = CMakeBuild(cmake, "Ninja", Path(__file__).parent / "consumer",
                          tmp_path / "consumer")
    consumer.configure(f"-Dmlp_model_DIR={prefix / libdir / 'cmake' / 'mlp_model'}",
                       f"-DAPP_SOURCE={EXAMPLE / 'main.cpp'}")
    events = consumer.events()
    assert buildgen_actions(events) == []  # the installed model needs no buildgen
    for app in ("consumer", "consumer_shared"):
        _check_output(consumer.build / app, reference)


@pytest.mark.skipif(pip_cmake() is None, reason="no cmake")
def test_without_c_enabled_the_plans_own_compiles_run(
    project: Path, tmp_path: Path, reference
) -> None:
    """A C++-only project: CMake cannot compile the generated C, so the plan's compile
    commands make the objects, and C++ links them."""
    lists = project / "CMakeLists.txt"
    lists.write_text(lists.read_text().replace("LANGUAGES C CXX", "LANGUAGES CXX"))
    cmake = pip_cmake()
    assert cmake is not None
    build = CMakeBuild(cmake, "Ninja", project, tmp_path / "build")
    build.configure()
    events = build.events()
    c_compiles = {f"CC mlp/cpu c.{level}.o" for level in c_variant_levels()} or {"CC mlp/cpu c.o"}
    assert {*c_compiles, "CC mlp/cpu model.o", "CC mlp/cpu weights.o"} <= set(events)
    assert _compiled(events) == ["main.cpp.o", "main.cpp.o"]
    assert "Linking CXX static library buildgen/mlp/cpu/libmlp.a" in events
    for app in ("mlp_app", "mlp_app_shared"):
        _check_output(build.build / app, reference)
    assert build.events() == []
