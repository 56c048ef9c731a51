"""Find the CPU libraries the openblas and onednn backends link, at gen, without the user
setting paths.

Each `discover_*` function is a rules `discover:` hook (rules/openblas.yaml,
rules/onednn.yaml): it gets the kind's resolved attributes and returns the values of the
unset ones it found, here `prefix` (headers in <prefix>/include, the library in
<prefix>/lib, which the rules also put on the rpath). A library that is not installed is an
error at gen whose message is the pip command that installs it; a `prefix` the user set is
checked the same way, so a typo fails at gen and not in the middle of a compile.

Where the libraries come from by default (both are extras: `pip install 'buildgen[cpu]'`):
  * OpenBLAS: PyPI `scipy-openblas32` (its get_include_dir()/get_lib_dir(); every symbol is
    prefixed `scipy_`), or, with `library: openblas`, a system OpenBLAS (Debian's
    libopenblas-dev) found by the compiler's own search paths or at `prefix`.
  * oneDNN: PyPI `onednn-cpu-gomp` (libdnnl.so) + `onednn-devel-cpu-gomp` (headers), which
    install into the environment's prefix. oneDNN 3.x is needed (the C API changed in 3.0).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from buildgen.errors import BuildgenError

PIP_CPU = "pip install 'buildgen[cpu]'"
OPENBLAS_PIP = "pip install scipy-openblas32"
ONEDNN_PIP = "pip install onednn-cpu-gomp onednn-devel-cpu-gomp"
ONEDNN_MIN_MAJOR = 3


def _missing(what: str, install: str, detail: str) -> BuildgenError:
    return BuildgenError(
        f"{what} is not installed ({detail}); install it with `{install}` "
        f"(or all CPU libraries with `{PIP_CPU}`), or set the kind's 'prefix' attribute "
        "to where it is installed"
    )


def _check_prefix(prefix: Path, header: str, library: str, what: str) -> None:
    problems = []
    if not (prefix / "include" / header).is_file():
        problems.append(f"no {prefix / 'include' / header}")
    if not any((prefix / "lib").glob(f"lib{library}.so*")):
        problems.append(f"no lib{library}.so in {prefix / 'lib'}")
    if problems:
        raise BuildgenError(f"{what} prefix {str(prefix)!r}: {'; '.join(problems)}")


@cache
def scipy_openblas_prefix() -> Path:
    """The folder of the scipy-openblas32 package: include/cblas.h, lib/libscipy_openblas.so."""
    try:
        import scipy_openblas32
    except ImportError as exc:
        raise _missing("OpenBLAS (PyPI scipy-openblas32)", OPENBLAS_PIP, str(exc)) from None
    include = Path(scipy_openblas32.get_include_dir())
    lib = Path(scipy_openblas32.get_lib_dir())
    if include.parent != lib.parent:
        # The rules derive both folders from one prefix; a future layout must be handled here.
        raise BuildgenError(
            f"scipy-openblas32 keeps headers in {include} and the library in {lib}: not under "
            "one prefix; set the openblas 'prefix' attribute"
        )
    _check_prefix(include.parent, "cblas.h", "scipy_openblas", "scipy-openblas32")
    return include.parent


def installed_file(dist: str, pattern: str) -> Path | None:
    """The installed file of distribution `dist` whose path matches `pattern` (a regex),
    if any: how the CPU and GPU libraries' wheels are found."""
    try:
        files = metadata.distribution(dist).files or []
    except metadata.PackageNotFoundError:
        return None
    for entry in files:
        if re.search(pattern, str(entry)):
            return Path(str(entry.locate())).resolve()
    return None


def onednn_version(prefix: Path) -> tuple[int, int]:
    """(major, minor) from <prefix>/include/oneapi/dnnl/dnnl_version.h (or dnnl_version.h)."""
    for header in ("oneapi/dnnl/dnnl_version.h", "dnnl_version.h"):
        path = prefix / "include" / header
        if path.is_file():
            text = path.read_text(errors="replace")
            major = re.search(r"#define\s+DNNL_VERSION_MAJOR\s+(\d+)", text)
            minor = re.search(r"#define\s+DNNL_VERSION_MINOR\s+(\d+)", text)
            if major and minor:
                return int(major[1]), int(minor[1])
    raise BuildgenError(f"oneDNN at {prefix}: no dnnl_version.h under {prefix / 'include'}")


@cache
def pip_onednn_prefix() -> Path:
    """The prefix the onednn-cpu-gomp wheels installed into: lib/libdnnl.so, include/dnnl.h."""
    library = installed_file("onednn-cpu-gomp", r"(^|/)libdnnl\.so$")
    if library is None:
        raise _missing("oneDNN (PyPI onednn-cpu-gomp)", ONEDNN_PIP, "no libdnnl.so installed")
    prefix = library.parent.parent
    if installed_file("onednn-devel-cpu-gomp", r"oneapi/dnnl/dnnl\.h$") is None:
        raise _missing(
            "oneDNN's headers (PyPI onednn-devel-cpu-gomp)",
            "pip install onednn-devel-cpu-gomp",
            f"libdnnl.so is in {library.parent} but dnnl.h is not installed",
        )
    return prefix


def _onednn_checked(prefix: Path) -> Path:
    _check_prefix(prefix, "oneapi/dnnl/dnnl.h", "dnnl", "oneDNN")
    major, minor = onednn_version(prefix)
    if major < ONEDNN_MIN_MAJOR:
        raise BuildgenError(
            f"oneDNN at {prefix} is {major}.{minor}; the onednn backend needs "
            f"{ONEDNN_MIN_MAJOR}.x (its C API changed in 3.0): `{ONEDNN_PIP}`"
        )
    return prefix


def discover_openblas(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """rules/openblas.yaml's `discover`: the prefix of the OpenBLAS the attributes name."""
    prefix = attrs.get("prefix")
    library = str(attrs.get("library"))
    if prefix is not None:
        _check_prefix(Path(prefix), "cblas.h", library, f"OpenBLAS ({library})")
        return {}
    if library == "openblas":
        return {}  # a system OpenBLAS: the compiler's and linker's default paths
    return {"prefix": str(scipy_openblas_prefix())}


def discover_onednn(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """rules/onednn.yaml's `discover`: the prefix of oneDNN 3.x."""
    prefix = attrs.get("prefix")
    if prefix is not None:
        _onednn_checked(Path(prefix))
        return {}
    return {"prefix": str(_onednn_checked(pip_onednn_prefix()))}
