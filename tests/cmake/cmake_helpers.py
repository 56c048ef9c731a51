"""Shared by the CMake tests: find the cmake binaries, run configure/build, read what ran."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from buildgen.ninja.tool import ninja_binary
from buildgen.resources import cmake_dir

REPO = Path(__file__).resolve().parents[2]
GENERATORS = ("Ninja", "Unix Makefiles")
DEBIAN_CMAKE = Path("/usr/bin/cmake")


def pip_cmake() -> str | None:
    """The `cmake` PyPI package's binary (CMake 4.x here), else the PATH's."""
    try:
        import cmake

        candidate = Path(cmake.CMAKE_BIN_DIR) / "cmake"
        if candidate.is_file():
            return str(candidate)
    except ImportError:
        pass
    return shutil.which("cmake")


def cmake_version(binary: str) -> tuple[int, ...]:
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    match = re.search(r"cmake version (\d+)\.(\d+)", done.stdout)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def cmake_params(generators: tuple[str, ...] = GENERATORS) -> list:
    """(cmake binary, generator) pairs: the PyPI cmake with each generator, and Debian's
    cmake (3.25) when it is installed."""
    params = []
    pip = pip_cmake()
    for generator in generators:
        params.append(pytest.param(pip, generator, id=f"pip-{generator.split()[0].lower()}",
                                   marks=pytest.mark.skipif(pip is None, reason="no cmake")))
    debian = DEBIAN_CMAKE.is_file() and cmake_version(str(DEBIAN_CMAKE)) >= (3, 20)
    for generator in generators:
        params.append(pytest.param(
            str(DEBIAN_CMAKE), generator, id=f"debian-{generator.split()[0].lower()}",
            marks=pytest.mark.skipif(not debian, reason="no Debian cmake >= 3.20"),
        ))
    return params


def subprocess_env(python_path: str = str(REPO)) -> dict[str, str]:
    """Actions run `python -m buildgen...`: make this checkout (or `python_path`) importable
    even when it is not installed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [python_path, env.get("PYTHONPATH")]))
    return env


# A line of build output that says an action ran: buildgen's descriptions (the custom
# commands' COMMENTs) and CMake's own compile and link lines. "[ 14%] " / "[3/7] " go first.
_PROGRESS = re.compile(r"^\[[^\]]*\]\s*")
_EVENT_WORDS = ("IMPORT ", "PARTITION ", "CODEGEN ", "EXECUTOR ", "REPORT ", "CC ",
                "Building ", "Linking ")


@dataclass(frozen=True)
class CMakeBuild:
    cmake: str
    generator: str
    source: Path
    build: Path
    package: Path = field(default_factory=cmake_dir)  # buildgen's CMake package
    python_path: str = str(REPO)  # where subprocesses import buildgen from

    def configure(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [self.cmake, "-S", str(self.source), "-B", str(self.build), "-G", self.generator,
               f"-DCMAKE_PREFIX_PATH={self.package}", f"-DBUILDGEN_PYTHON={sys.executable}",
               *args]
        if self.generator == "Ninja":
            cmd.append(f"-DCMAKE_MAKE_PROGRAM={ninja_binary()}")
        return self._run(cmd, check)

    def build_all(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self._run([self.cmake, "--build", str(self.build), "-j2", *args], check)

    def events(self, *args: str) -> list[str]:
        """Build; return what ran, in order, without progress prefixes."""
        done = self.build_all(*args)
        lines = (_PROGRESS.sub("", line) for line in done.stdout.splitlines())
        return [line for line in lines if line.startswith(_EVENT_WORDS)]

    def _run(self, cmd: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(cmd, capture_output=True, text=True,
                              env=subprocess_env(self.python_path),
                              timeout=600, check=False)
        if check and done.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
        return done


def buildgen_actions(events: list[str]) -> list[str]:
    """The buildgen actions among `events` (custom commands, not CMake's compiles/links)."""
    return [e for e in events if not e.startswith(("Building ", "Linking "))]


def c_variant_levels() -> tuple[str, ...]:
    """The ISA levels a `c` host without march is compiled for here (rules/c.yaml)."""
    from buildgen.targets import resolve_target

    return tuple(v.level for v in resolve_target("t", {"kind": "c"}).toolchain("c").variants)


def c_objects(object_name: str = "c.c.o") -> list[str]:
    """The c module's objects as a build without march names them: one per ISA level."""
    return [object_name] * max(1, len(c_variant_levels()))


def c_kernel_sources() -> list[str]:
    """The c host's shared kernels sources (rules/c.yaml `shared_kernels`), by file name."""
    from buildgen.targets import get_kind

    spec = get_kind("c").shared_kernels
    assert spec is not None
    return sorted(spec.sources)


def c_kernel_objects() -> list[str]:
    """What CMake compiles of the shared kernels for a `c` host without march."""
    return sorted(c_objects(f"{source}.o")[0] for source in c_kernel_sources()
                  for _ in c_objects())
