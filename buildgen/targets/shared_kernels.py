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

from buildgen.errors import BuildgenError
from buildgen.resources import include_dir

if TYPE_CHECKING:
    from buildgen.targets.model import Toolchain


@dataclass(frozen=True)
class SharedKernelsSpec:
    render: str | None = None  # "module:function" rendering one shard from its instantiations
    shards: int = 1  # how many translation units hold the manifest's kernels
    sources: tuple[str, ...] = ()  # the fixed form: files of buildgen's include dir
    module_flags: tuple[str, ...] = ()  # the fixed form: how the kind's modules link to them
    eager: tuple[str, ...] = ()  # the fixed form: sources compiled before a module asks

    @property
    def fixed(self) -> bool:
        return bool(self.sources)


def load_shared_kernels(data: dict[str, Any] | None) -> SharedKernelsSpec | None:
    if data is None:
        return None
    if "sources" in data:
        sources = tuple(map(str, data["sources"]))
        eager = tuple(map(str, data.get("eager", ())))
        if not set(eager) <= set(sources):
            raise BuildgenError(f"rules' shared_kernels: eager "
                                f"{sorted(set(eager) - set(sources))} not among its sources")
        return SharedKernelsSpec(sources=sources, eager=eager,
                                 module_flags=tuple(data.get("module_flags", ())))
    return SharedKernelsSpec(render=str(data["render"]), shards=int(data["shards"]))


def fixed_sources(spec: SharedKernelsSpec) -> tuple[Path, ...]:
    return tuple(include_dir() / name for name in spec.sources)


def called_by(source: Path, module_text: str) -> bool:
    """Whether a module calls an entry point a fixed kernels source exports: the names of
    the list it names (`#define BG_KERNELS_LIBRARY BG_KERNELS_CONV`), as bg_kernels_linked.h
    declares them."""
    return any(re.search(rf"\b{name}\s*\(", module_text) for name in _exports(source))


def linked_by(spec: SharedKernelsSpec, module_text: str) -> tuple[Path, ...]:
    """The fixed sources a library of a module must link, in the rules' order: those whose
    entry points the module calls, and the sources those call in turn (a source says so
    with `#define BG_KERNELS_LINKS_<FAMILY>`: the convolution links the GEMM)."""
    sources = fixed_sources(spec)
    by_family = {_family(source): source for source in sources}
    wanted = {source for source in sources if called_by(source, module_text)}
    pending = list(wanted)
    while pending:
        for family in _links(pending.pop()):
            if family not in by_family:
                raise RuntimeError(f"no source of the rules' shared_kernels holds the {family} "
                                   "family a kernels source links")
            if by_family[family] not in wanted:
                wanted.add(by_family[family])
                pending.append(by_family[family])
    return tuple(source for source in sources if source in wanted)


@cache
def _family(source: Path) -> str:
    listed = re.search(r"#define BG_KERNELS_LIBRARY BG_KERNELS_(\w+)",
                       source.read_text(encoding="utf-8"))
    if listed is None:
        raise RuntimeError(f"{source}: names no BG_KERNELS_<family> list of bg_kernels_linked.h")
    return listed.group(1)


@cache
def _links(source: Path) -> tuple[str, ...]:
    return tuple(re.findall(r"^#define BG_KERNELS_LINKS_(\w+)\s*$",
                            source.read_text(encoding="utf-8"), re.M))


@cache
def _exports(source: Path) -> tuple[str, ...]:
    header = (include_dir() / "bg_kernels_linked.h").read_text(encoding="utf-8")
    block = re.search(rf"#define BG_KERNELS_{_family(source)}\(X\)((?:[^\n]*\\\n)*[^\n]*)",
                      header)
    if block is None:
        raise RuntimeError(f"bg_kernels_linked.h has no BG_KERNELS_{_family(source)} list")
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
