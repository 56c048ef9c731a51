"""A non-editable install: the wheel carries the CMake package, and a project builds a model
with it, the fragment's actions running the installed buildgen (not this checkout)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cmake_helpers import REPO, CMakeBuild, pip_cmake, subprocess_env
from tiny_project import check_app, write_project

pytestmark = [pytest.mark.slow, pytest.mark.skipif(pip_cmake() is None, reason="no cmake")]


@pytest.fixture(scope="module")
def site_packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """buildgen installed from a wheel of this checkout into a folder of its own."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, source / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("buildgen", "rules", "schemas"):
        shutil.copytree(REPO / folder, source / folder, ignore=skip)
    wheels = tmp_path_factory.mktemp("wheels")
    pip = [sys.executable, "-m", "pip"]
    # With build isolation, pip fetches the setuptools pyproject.toml asks for; the
    # interpreter's own may be older (a fresh venv ships setuptools 65).
    subprocess.run([*pip, "wheel", "--no-deps", "-q", "-w", str(wheels), str(source)],
                   check=True, capture_output=True)
    target = tmp_path_factory.mktemp("site-packages")
    (wheel,) = wheels.glob("buildgen-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    return target


def test_installed_cmake_dir_is_inside_the_installed_package(site_packages: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "buildgen", "--cmake-dir"], cwd=site_packages,
                          env=subprocess_env(str(site_packages)), capture_output=True,
                          text=True, check=True)
    package = Path(done.stdout.strip())
    assert package == site_packages / "buildgen" / "cmake"
    assert (package / "buildgenConfig.cmake").is_file()


def test_a_project_builds_with_the_installed_package(site_packages: Path, tmp_path: Path) -> None:
    project = tmp_path / "app"
    write_project(project)
    cmake = pip_cmake()
    assert cmake is not None
    build = CMakeBuild(cmake, "Ninja", project, tmp_path / "build",
                       package=site_packages, python_path=str(site_packages))
    build.configure()
    fragment = (tmp_path / "build" / "buildgen" / "cmake-fragment" / "CMakeLists.txt").read_text()
    assert str(REPO) not in fragment  # everything comes from the installed copy
    assert build.events()
    check_app(build.build / "app", rows=2, seed=1)
