"""Find the CUDA toolkit (nvcc, the runtime's headers and libcudart) at gen.

rules/cuda.yaml's `discover:` hook. Where nvcc comes from, first found wins:
  1. the `cuda_home` attribute (nvcc is <cuda_home>/bin/nvcc): a typo fails here;
  2. the system CUDA: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, `nvcc` on PATH;
  3. the PyPI `nvidia-cuda-nvcc` package (nvidia/cu13/bin/nvcc; it pulls the runtime,
     nvvm and crt packages, which install into the same nvidia/cu13 folder).
The runtime (cuda_runtime_api.h, libcudart) comes from the same toolkit (the PyPI nvcc's
folder is the PyPI runtime's), else from the PyPI `nvidia-cuda-runtime` package.

The values it returns fill the cuda kind's unset attributes `cuda_home`, `nvcc`,
`cuda_include`, `cuda_lib` and `cudart_name` (linked as -l:<name>: the wheel ships only
libcudart.so.13, no unversioned name); external codegens for cuda call `discover_cuda`
from their own hooks to find the same toolkit. Being on the command lines, a moved toolkit
re-runs every compile and link it affects.

A CPU-only manifest never calls this: only a target with a cuda member resolves its
toolchain. A missing toolkit is a gen error naming the install command.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from buildgen.backends.libraries import installed_file
from buildgen.errors import BuildgenError, Diagnostic

PIP_CUDA = "pip install 'buildgen[cuda]'"
TOOLKIT_URL = "https://developer.nvidia.com/cuda-downloads"
SYSTEM_HOMES = ("/usr/local/cuda",)


@dataclass(frozen=True)
class CudaToolkit:
    home: Path  # the folder holding bin/nvcc
    nvcc: Path
    include: Path  # holds cuda_runtime_api.h
    lib: Path  # holds libcudart.so*
    cudart_name: str  # the runtime library's file name in `lib`, e.g. libcudart.so.13

    def as_attrs(self) -> dict[str, Any]:
        return {
            "cuda_home": str(self.home),
            "nvcc": str(self.nvcc),
            "cuda_include": str(self.include),
            "cuda_lib": str(self.lib),
            "cudart_name": self.cudart_name,
        }


def _missing(detail: str) -> BuildgenError:
    return BuildgenError(Diagnostic(
        f"the CUDA toolkit (nvcc) was not found: {detail}",
        hint=f"install it with `{PIP_CUDA}` (nvcc and the CUDA libraries from PyPI) or the "
        f"CUDA toolkit ({TOOLKIT_URL}), or set the cuda target's 'cuda_home' attribute",
    ))


def _cudart_in(lib: Path) -> str | None:
    """The file name of the shared libcudart in `lib`, if it is there."""
    if (lib / "libcudart.so").exists():
        return "libcudart.so"
    versioned = sorted(lib.glob("libcudart.so.[0-9]*"), key=lambda p: (len(p.name), p.name))
    return versioned[0].name if versioned else None


def _runtime_in(home: Path) -> tuple[Path, Path, str] | None:
    """(include, lib, cudart) of a runtime installed inside toolkit folder `home`."""
    include = home / "include"
    if not (include / "cuda_runtime_api.h").is_file():
        return None
    for lib in (home / "lib64", home / "lib"):
        cudart = _cudart_in(lib)
        if cudart is not None:
            return include, lib, cudart
    return None


def _dist_folder(dist: str, suffix: str) -> Path | None:
    """The folder of the first installed file of `dist` whose path ends with `suffix`."""
    found = installed_file(dist, re.escape(suffix) + "$")
    return found.parent if found is not None else None


@cache
def pip_runtime() -> tuple[Path, Path, str] | None:
    """(include, lib, cudart) of the PyPI nvidia-cuda-runtime package, if installed."""
    include = _dist_folder("nvidia-cuda-runtime", "include/cuda_runtime_api.h")
    if include is None:
        return None
    lib = include.parent / "lib"
    cudart = _cudart_in(lib)
    return (include, lib, cudart) if cudart is not None else None


def _system_homes() -> list[Path]:
    homes = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")]
    found = [Path(h) for h in homes if h] + [Path(h) for h in SYSTEM_HOMES]
    on_path = shutil.which("nvcc")
    if on_path is not None:
        found.append(Path(on_path).resolve().parent.parent)
    return found


def pip_nvcc_home() -> Path | None:
    """The folder of the PyPI nvidia-cuda-nvcc package's toolkit (nvidia/cu13), if installed."""
    nvcc_bin = _dist_folder("nvidia-cuda-nvcc", "bin/nvcc")
    return nvcc_bin.parent if nvcc_bin is not None else None


def toolkit_at(home: Path) -> CudaToolkit:
    """The toolkit in folder `home`; raises when it has no nvcc or no runtime anywhere."""
    nvcc = home / "bin" / "nvcc"
    if not (nvcc.is_file() and os.access(nvcc, os.X_OK)):
        raise _missing(f"no executable {nvcc}")
    own = _runtime_in(home)
    if own is not None:
        include, lib, cudart = own
        return CudaToolkit(home, nvcc, include, lib, cudart)
    wheel = pip_runtime()
    if wheel is None:
        raise BuildgenError(Diagnostic(
            f"the CUDA toolkit at {home} has nvcc but no CUDA runtime "
            "(cuda_runtime_api.h, libcudart.so)",
            hint=f"install it with `pip install nvidia-cuda-runtime` (or `{PIP_CUDA}`)",
        ))
    include, lib, cudart = wheel
    return CudaToolkit(home, nvcc, include, lib, cudart)


@cache
def find_toolkit(cuda_home: str | None) -> CudaToolkit:
    """The toolkit at `cuda_home` if set, else the first one found (see the module doc)."""
    if cuda_home is not None:
        return toolkit_at(Path(cuda_home))
    tried: list[str] = []
    for home in [*_system_homes(), pip_nvcc_home()]:
        if home is None or str(home) in tried:
            continue
        tried.append(str(home))
        if (home / "bin" / "nvcc").is_file():
            return toolkit_at(home)
    raise _missing(
        f"looked in $CUDA_HOME, $CUDA_PATH, {', '.join(SYSTEM_HOMES)}, nvcc on PATH "
        "and the PyPI package nvidia-cuda-nvcc"
    )


def discover_cuda(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """rules/cuda.yaml's `discover`: the toolkit's paths for the unset attributes (the
    toolchain keeps the ones a user set).

    External codegens for cuda (cublas, cudnn, cutlass) may call it from their own hooks:
    `cuda_home` is inherited from the device, so they find the same toolkit.

    With `host_triple` (a host of another architecture), nvcc is still this machine's, but
    the runtime is the target's (`target_cuda`), and nvcc's own headers (crt/) follow it."""
    toolkit = find_toolkit(attrs.get("cuda_home"))
    triple = attrs.get("host_triple")
    if not triple:
        return toolkit.as_attrs()
    target = target_runtime(attrs.get("target_cuda"), str(triple))
    return {**toolkit.as_attrs(), "cuda_include": str(target.include),
            "cuda_lib": str(target.lib), "cudart_name": target.cudart_name,
            "nvcc_include": str(toolkit.home / "include")}


def target_runtime(folder: str | None, triple: str) -> CudaToolkit:
    """The CUDA runtime of another architecture in `folder` (include/, lib/ or lib64/)."""
    hint = ("set the cuda device's target_cuda to the target's CUDA runtime: a Jetson "
            "sysroot's /usr/local/cuda/targets/aarch64-linux, or an aarch64 "
            "nvidia-cuda-runtime wheel unpacked (pip download --no-deps --only-binary=:all: "
            "--platform manylinux2014_aarch64 nvidia-cuda-runtime; its nvidia/cu13 folder)")
    if not folder:
        raise BuildgenError(Diagnostic(
            f"the cuda device builds for host triple {triple!r} (another architecture), so "
            "it needs that architecture's CUDA runtime", hint=hint))
    # absolute on the command lines: compiles and links run in the build folder
    home = Path(os.path.expanduser(folder)).resolve()
    found = _runtime_in(home)
    if found is None:
        raise BuildgenError(Diagnostic(
            f"target_cuda {folder!r} holds no CUDA runtime (include/cuda_runtime_api.h and "
            "lib/ or lib64/ with libcudart.so)", hint=hint))
    include, lib, cudart = found
    return CudaToolkit(home, home / "bin" / "nvcc", include, lib, cudart)
