"""Find the NVIDIA libraries the cuda external codegens use, at gen, without user paths.

Each `discover_*` function is a rules `discover:` hook (rules/cublas.yaml, rules/cudnn.yaml):
it gets the kind's resolved attributes and returns the values of the unset ones it found:
the toolkit's (from buildgen.backends.cuda_toolchain, so nvcc and the runtime headers are the
cuda device's) and the library's `include_dir` and `lib_dir`. The rules pass `include_dir`
with -idirafter (after nvcc's own headers: the runtime headers some wheels also ship must not
win over the toolkit's) and put `lib_dir` on the rpath. The wheels ship only versioned
libraries (libcublas.so.13, libcudnn.so.9), so the rules link them with `-l:<file>`.

Where the libraries come from by default (the `cuda` extra: `pip install 'buildgen[cuda]'`):
  * cuBLAS and cuBLASLt: PyPI `nvidia-cublas` (nvidia/cu13/include/cublas_v2.h,
    nvidia/cu13/lib/libcublas.so.13 and libcublasLt.so.13);
  * cuDNN 9: PyPI `nvidia-cudnn-cu13` (nvidia/cudnn/include/cudnn.h,
    nvidia/cudnn/lib/libcudnn.so.9, which loads its sub-libraries from the same folder).
A library that is not installed is an error at gen naming the pip command; an `include_dir`
or `lib_dir` the user set is checked the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from buildgen.backends.libraries import installed_file
from buildgen.errors import BuildgenError, Diagnostic

PIP_CUDA = "pip install 'buildgen[cuda]'"


@dataclass(frozen=True)
class WheelLibrary:
    """One NVIDIA library as a PyPI distribution lays it out."""

    what: str  # for messages: "cuBLAS"
    dist: str  # the PyPI distribution
    header: str  # a header its include folder must hold
    libraries: tuple[str, ...]  # files its lib folder must hold (what the rules link)

    @property
    def pip(self) -> str:
        return f"pip install {self.dist}"


CUBLAS = WheelLibrary("cuBLAS", "nvidia-cublas", "cublas_v2.h",
                      ("libcublas.so.13", "libcublasLt.so.13"))
CUDNN = WheelLibrary("cuDNN 9", "nvidia-cudnn-cu13", "cudnn.h", ("libcudnn.so.9",))


@dataclass(frozen=True)
class LibraryDirs:
    include: Path
    lib: Path

    def as_attrs(self) -> dict[str, Any]:
        return {"include_dir": str(self.include), "lib_dir": str(self.lib)}


def _missing(library: WheelLibrary, detail: str) -> BuildgenError:
    return BuildgenError(Diagnostic(
        f"{library.what} is not installed ({detail})",
        hint=f"install it with `{library.pip}` (or every CUDA library with `{PIP_CUDA}`), or "
        "set the kind's 'include_dir' and 'lib_dir' attributes to where it is installed",
    ))


def _problems(library: WheelLibrary, include: Path, lib: Path) -> list[str]:
    problems = []
    if not (include / library.header).is_file():
        problems.append(f"no {include / library.header}")
    problems += [f"no {lib / name}" for name in library.libraries if not (lib / name).exists()]
    return problems


@cache
def wheel_dirs(library: WheelLibrary) -> LibraryDirs:
    """The include and lib folders of `library`'s installed wheel."""
    header = installed_file(library.dist, re.escape(f"include/{library.header}") + "$")
    if header is None:
        raise _missing(library, f"no PyPI package {library.dist} with {library.header}")
    dirs = LibraryDirs(header.parent, header.parent.parent / "lib")
    problems = _problems(library, dirs.include, dirs.lib)
    if problems:
        raise _missing(library, f"{library.dist} is incomplete: {'; '.join(problems)}")
    return dirs


def library_dirs(library: WheelLibrary, attrs: Mapping[str, Any]) -> LibraryDirs:
    """The folders the attributes name (checked), else the wheel's."""
    include, lib = attrs.get("include_dir"), attrs.get("lib_dir")
    if include is None and lib is None:
        return wheel_dirs(library)
    if include is None or lib is None:
        found = wheel_dirs(library)
        include = include if include is not None else found.include
        lib = lib if lib is not None else found.lib
    dirs = LibraryDirs(Path(include), Path(lib))
    problems = _problems(library, dirs.include, dirs.lib)
    if problems:
        raise BuildgenError(Diagnostic(
            f"{library.what}: the include_dir/lib_dir attributes: {'; '.join(problems)}",
            hint=f"unset them to use the {library.dist} wheel (`{library.pip}`)",
        ))
    return dirs


def _discover(library: WheelLibrary, attrs: Mapping[str, Any]) -> dict[str, Any]:
    from buildgen.backends.cuda_toolchain import discover_cuda

    return {**discover_cuda(attrs), **library_dirs(library, attrs).as_attrs()}


def discover_cublas(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """rules/cublas.yaml's `discover`: the toolkit, and cuBLAS's include and lib folders."""
    return _discover(CUBLAS, attrs)


def discover_cudnn(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """rules/cudnn.yaml's `discover`: the toolkit, and cuDNN's include and lib folders."""
    return _discover(CUDNN, attrs)


# --- CUTLASS (rules/cutlass.yaml): header-only, from the PyPI nvidia-cutlass wheel ---------

CUTLASS_PIP = "pip install nvidia-cutlass"
CUTLASS_MIN_MAJOR = 3  # the CUTLASS 2.x device API the backend instantiates ships in 3.x, 4.x


def cutlass_include_dirs() -> tuple[str, ...]:
    """The nvidia-cutlass wheel's header folders: cutlass_library/source/include (CUTLASS and
    CuTe) and source/tools/util/include. Found without importing the package (its import
    pulls cuda-python)."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        raise BuildgenError(Diagnostic(
            "CUTLASS headers are not installed (no Python package cutlass_library)",
            hint=f"install them with `{CUTLASS_PIP}` (or every CUDA library with "
                 "`pip install 'buildgen[cuda]'`), or set the cutlass target's include_dirs",
        ))
    source = Path(spec.origin).parent / "source"
    dirs = (source / "include", source / "tools" / "util" / "include")
    version = dirs[0] / "cutlass" / "version.h"
    if not version.is_file():
        raise BuildgenError(Diagnostic(
            f"the nvidia-cutlass package at {source.parent} has no {version.name} under "
            f"{dirs[0]}", hint=f"reinstall it: `{CUTLASS_PIP} --force-reinstall`"))
    major = re.search(r"#define\s+CUTLASS_MAJOR\s+(\d+)", version.read_text(errors="replace"))
    if major is None or int(major[1]) < CUTLASS_MIN_MAJOR:
        raise BuildgenError(Diagnostic(
            f"CUTLASS at {dirs[0]} is older than {CUTLASS_MIN_MAJOR}.0",
            hint=f"`{CUTLASS_PIP} --upgrade`"))
    return tuple(str(d) for d in dirs)


def discover_cutlass(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """rules/cutlass.yaml's `discover`: the toolkit (the cuda device's) and the CUTLASS
    header folders; include_dirs a user set are checked to hold cutlass/cutlass.h."""
    from buildgen.backends.cuda_toolchain import discover_cuda

    found = dict(discover_cuda(attrs))
    dirs = attrs.get("include_dirs")
    if dirs is None:
        return {**found, "include_dirs": cutlass_include_dirs()}
    if not any((Path(d) / "cutlass" / "cutlass.h").is_file() for d in dirs):
        raise BuildgenError(Diagnostic(
            f"the cutlass include_dirs {list(dirs)} hold no cutlass/cutlass.h",
            hint=f"unset include_dirs to use the nvidia-cutlass wheel (`{CUTLASS_PIP}`)"))
    return found
