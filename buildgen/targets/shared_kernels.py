"""A kind's `shared_kernels:` rules block: kernels compiled once for every model of a build.

Two forms:
  - rendered (cutlass): each model's codegen lists the instantiations its module calls; a
    manifest-wide action renders them into `shards` sources (`render`);
  - fixed (c): sources shipped in buildgen's include dir (`sources`), the same for every
    model, compiled once per toolchain (and ISA level); the kind's modules are compiled with
    `module_flags`, which make them call into them instead of compiling their own copies.

Only the declaration lives here; buildgen.ninja.shared_modules plans the actions and
buildgen.stages.shared_kernels_stage renders the shards.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from buildgen.resources import include_dir

if TYPE_CHECKING:
    from buildgen.targets.model import Toolchain


@dataclass(frozen=True)
class SharedKernelsSpec:
    render: str | None = None  # "module:function" rendering one shard from its instantiations
    shards: int = 1  # how many translation units hold the manifest's kernels
    sources: tuple[str, ...] = ()  # the fixed form: files of buildgen's include dir
    module_flags: tuple[str, ...] = ()  # the fixed form: how the kind's modules link to them

    @property
    def fixed(self) -> bool:
        return bool(self.sources)


def load_shared_kernels(data: dict[str, Any] | None) -> SharedKernelsSpec | None:
    if data is None:
        return None
    if "sources" in data:
        return SharedKernelsSpec(sources=tuple(map(str, data["sources"])),
                                 module_flags=tuple(data.get("module_flags", ())))
    return SharedKernelsSpec(render=str(data["render"]), shards=int(data["shards"]))


def fixed_sources(spec: SharedKernelsSpec) -> tuple[Path, ...]:
    return tuple(include_dir() / name for name in spec.sources)


def called_by(source: Path, module_text: str) -> bool:
    """Whether a module calls an entry point a fixed kernels source exports: the names of
    the list it names (`#define BG_KERNELS_LIBRARY BG_KERNELS_CONV`), as bg_kernels_linked.h
    declares them. The stage API builds only what a library links; the build compiles every
    source once per toolchain, not knowing at gen what the modules will call."""
    return any(re.search(rf"\b{name}\s*\(", module_text) for name in _exports(source))


@cache
def _exports(source: Path) -> tuple[str, ...]:
    listed = re.search(r"#define BG_KERNELS_LIBRARY (\w+)", source.read_text(encoding="utf-8"))
    header = (include_dir() / "bg_kernels_linked.h").read_text(encoding="utf-8")
    block = re.search(rf"#define {listed.group(1)}\(X\)((?:[^\n]*\\\n)*[^\n]*)", header) \
        if listed else None
    if block is None:
        raise RuntimeError(f"{source}: names no BG_KERNELS_<family> list of bg_kernels_linked.h")
    return tuple(re.findall(r"X\((\w+)\)", block.group(1)))


def linked_toolchain(toolchain: Toolchain, spec: SharedKernelsSpec) -> Toolchain:
    """The toolchain fixed kernels sources and the modules linking them compile with: the
    kind's, plus `module_flags` and the kernels' digest, which names their link symbols."""
    flags = (*spec.module_flags, f"-DBG_KERNELS_ID=k{kernels_digest()}")
    return dataclasses.replace(toolchain, cflags=(*toolchain.cflags, *flags))


@cache
def kernels_digest() -> str:
    """8 hex digits of buildgen's C headers and sources: libraries whose kernels differ get
    different link names (bg_kernels_linked.h)."""
    digest = hashlib.sha256()
    for path in sorted(include_dir().iterdir()):
        if path.suffix in (".h", ".c") and path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:8]
