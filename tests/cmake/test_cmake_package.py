"""The CMake package: found the ways the README says, version-checked, and the `buildgen
cmake` / `buildgen --cmake-dir` commands behind it. Configures only `LANGUAGES NONE`
projects (no compiler is probed), so these stay quick."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cmake_helpers import REPO, pip_cmake, subprocess_env

from buildgen import __version__
from buildgen.cli import main
from buildgen.cmake.generate import generate_cmake
from buildgen.resources import cmake_dir

CMAKE = pip_cmake()
needs_cmake = pytest.mark.skipif(CMAKE is None, reason="no cmake")

MANIFEST = """\
buildgen: 1
targets:
  cpu: {kind: composite, host: {kind: c}}
  small: {kind: c, opt_level: 1}
models:
  mlp:
    source: ../../examples/models/mlp.onnx
    inputs: {x: [1, 512]}
    targets: [cpu, small]
"""


def _configure(tmp_path: Path, body: str, *defines: str) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "src"
    source.mkdir(parents=True, exist_ok=True)
    (source / "CMakeLists.txt").write_text(
        f"cmake_minimum_required(VERSION 3.20)\nproject(probe LANGUAGES NONE)\n{body}\n"
    )
    assert CMAKE is not None
    cmd = [CMAKE, "-S", str(source), "-B", str(tmp_path / "build"), *defines]
    return subprocess.run(cmd, capture_output=True, text=True, env=subprocess_env(),
                          check=False, timeout=300)


def test_cmake_dir_prints_the_package_folder(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--cmake-dir"])
    assert exited.value.code == 0
    printed = Path(capsys.readouterr().out.strip())
    assert printed == cmake_dir()
    names = {p.name for p in printed.iterdir()}
    assert {"buildgenConfig.cmake", "buildgenConfigVersion.cmake", "buildgenModels.cmake",
            "buildgenFragment.cmake", "buildgenDepfile.cmake"} <= names


def test_buildgen_cmake_writes_the_fragment_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "a" / "b" / "BUILD.yaml"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(MANIFEST.replace("../../examples", str(REPO / "examples")))
    build = tmp_path / "out"
    assert main(["cmake", "--manifest", str(manifest), "--build-dir", str(build)]) == 0
    fragment_dir = Path(capsys.readouterr().out.strip())
    assert fragment_dir == build / "cmake-fragment"
    text = (fragment_dir / "CMakeLists.txt").read_text()
    assert '_buildgen_library("buildgen_mlp_cpu"' in text
    assert (build / "_targets" / "small" / "options" / "c.json").is_file()
    # Configure runs it every time: unchanged inputs rewrite nothing.
    assert generate_cmake(manifest, build).changed == ()
    only = generate_cmake(manifest, build, targets=["small"])
    assert only.changed == ("cmake-fragment/CMakeLists.txt",)
    text = (fragment_dir / "CMakeLists.txt").read_text()
    assert "buildgen_mlp_small" in text and "buildgen_mlp_cpu" not in text


def test_buildgen_cmake_names_a_misspelt_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "BUILD.yaml"
    manifest.write_text(MANIFEST.replace("../../examples", str(REPO / "examples")))
    assert main(["cmake", "--manifest", str(manifest), "--model", "mpl",
                 "--target", "gpu"]) == 1
    err = capsys.readouterr().err
    assert "no model 'mpl'" in err and "did you mean 'mlp'?" in err
    assert "target 'gpu'" in err


@needs_cmake
@pytest.mark.parametrize("how", ["prefix", "dir", "site-packages"])
def test_find_package_finds_buildgen(tmp_path: Path, how: str) -> None:
    define = {
        "prefix": f"-DCMAKE_PREFIX_PATH={cmake_dir()}",
        "dir": f"-Dbuildgen_DIR={cmake_dir()}",
        # scikit-build-core puts site-packages on the prefix path: <prefix>/buildgen/cmake/.
        "site-packages": f"-DCMAKE_PREFIX_PATH={cmake_dir().parent.parent}",
    }[how]
    body = ('find_package(buildgen 0.1 CONFIG REQUIRED)\n'
            'message(STATUS "found ${buildgen_VERSION} at ${buildgen_CMAKE_DIR}")\n'
            'if(NOT COMMAND buildgen_add_models)\n  message(FATAL_ERROR "no function")\nendif()')
    done = _configure(tmp_path, body, define)
    assert done.returncode == 0, done.stderr
    assert f"found {__version__} at {cmake_dir()}" in done.stdout


@needs_cmake
def test_find_package_checks_the_version(tmp_path: Path) -> None:
    major = int(__version__.split(".")[0])
    body = (f"find_package(buildgen {major + 1} CONFIG QUIET)\n"
            'message(STATUS "newer found: ${buildgen_FOUND}")')
    done = _configure(tmp_path, body, f"-Dbuildgen_DIR={cmake_dir()}")
    assert done.returncode == 0, done.stderr
    assert "newer found: 0" in done.stdout


@needs_cmake
def test_add_models_reports_manifest_errors_with_their_location(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "BUILD.yaml").write_text(MANIFEST.replace("source:", "sorce:"))
    body = "find_package(buildgen CONFIG REQUIRED)\nbuildgen_add_models(MANIFEST BUILD.yaml)"
    done = _configure(tmp_path, body, f"-Dbuildgen_DIR={cmake_dir()}",
                      f"-DBUILDGEN_PYTHON={sys.executable}")
    assert done.returncode != 0
    assert "BUILD.yaml:" in done.stderr and "sorce" in done.stderr


@needs_cmake
def test_add_models_finds_and_checks_its_python(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "BUILD.yaml").write_text(
        MANIFEST.replace("../../examples", str(REPO / "examples"))
    )
    body = "find_package(buildgen CONFIG REQUIRED)\nbuildgen_add_models(MANIFEST BUILD.yaml)"
    package = f"-Dbuildgen_DIR={cmake_dir()}"
    # Without BUILDGEN_PYTHON, a project's own Python3_EXECUTABLE is the first candidate.
    done = _configure(tmp_path, body, package, f"-DPython3_EXECUTABLE={sys.executable}")
    cache = (tmp_path / "build" / "CMakeCache.txt").read_text()
    assert f"BUILDGEN_PYTHON:FILEPATH={sys.executable}" in cache
    # The fragment was generated and added; linking needs C or C++, which NONE lacks.
    assert done.returncode != 0 and "needs the C or CXX language" in done.stderr
    assert (tmp_path / "build" / "buildgen" / "cmake-fragment" / "CMakeLists.txt").is_file()

    (tmp_path / "wrong" / "src").mkdir(parents=True)
    (tmp_path / "wrong" / "src" / "BUILD.yaml").write_text(MANIFEST)
    wrong = _configure(tmp_path / "wrong", body, package, "-DBUILDGEN_PYTHON=/bin/false")
    assert wrong.returncode != 0 and "does not import the buildgen" in wrong.stderr
