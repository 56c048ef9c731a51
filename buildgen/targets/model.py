"""Resolved targets: the canonical form every later stage reads (target.json).

A resolved target is always a flat composite: one host, at most one device, and the
external codegens ("accelerators") in priority order, each with every attribute filled.
Its JSON is canonical (sorted keys, defaults and inherited values filled), so two ways of
writing one target give the same bytes and the same digest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from buildgen.targets.registry import get_kind

TARGET_FORMAT = 1


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class TargetInstance:
    """One kind with every attribute filled (defaults included), sorted by name."""

    kind: str
    attrs: tuple[tuple[str, Any], ...]

    @classmethod
    def make(cls, kind: str, attrs: dict[str, Any]) -> TargetInstance:
        return cls(kind, tuple(sorted((k, _freeze(v)) for k, v in attrs.items())))

    def get(self, name: str) -> Any:
        return dict(self.attrs)[name]

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **{k: _thaw(v) for k, v in self.attrs}}

    def with_attrs(self, changes: dict[str, Any]) -> TargetInstance:
        return TargetInstance.make(self.kind, {**dict(self.attrs), **changes})

    def keep(self, affects: Iterable[str]) -> TargetInstance:
        """Only the attributes whose change re-runs one of the `affects` actions."""
        wanted = set(affects)
        table = {a.name: a.affects for a in get_kind(self.kind).attributes}
        return TargetInstance(self.kind, tuple((k, v) for k, v in self.attrs if table[k] in wanted))

    def describe(self) -> str:
        """`kind {attr: value, ...}`, for messages."""
        attrs = ", ".join(f"{k}: {json.dumps(_thaw(v))}" for k, v in self.attrs)
        return f"{self.kind} {{{attrs}}}" if attrs else self.kind


@dataclass(frozen=True)
class IsaVariant:
    """One compile of a module for one instruction-set level (rules' `isa_variants`)."""

    level: str  # "x86-64-v3"
    cflags: tuple[str, ...]  # added to the toolchain's

    @property
    def suffix(self) -> str:
        """What the variant's exported symbols end with: "__isa_x86_64_v3" (a bare
        "__x86_64" would be the compiler's predefined macro)."""
        return "__isa_" + re.sub(r"[^A-Za-z0-9]", "_", self.level)


@dataclass(frozen=True)
class Toolchain:
    """How to compile and link one backend's module, resolved from its rules file."""

    language: str
    cc: str
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...]
    pool: str | None
    pool_depth: int | None = None  # set by the kind owning the pool's depth attribute
    # A program the compile runs under (ccache, sccache) and its arguments; () = none.
    launcher: tuple[str, ...] = ()
    # The module compiled once per level, best last; () = one compile with `cflags`.
    variants: tuple[IsaVariant, ...] = ()
    # Without variants, the one ISA pinned (march's value), or "" for the compiler's default.
    pinned_isa: str = ""
    # The backend kind: its compiles ask remote workers for that kind's platform properties.
    kind: str = ""

    @property
    def stoppable(self) -> bool:
        """Whether a compile can be stopped midway and leave nothing but its outputs behind
        (the cache wrapper may start it before its lookup: buildgen/cache/exec.py). gcc and
        clang remove their temp files when terminated; nvcc leaves its tmpxft_* files in
        TMPDIR (nvcc 13.0, SIGTERM to its group), and a launcher's server (sccache) would
        go on compiling."""
        return self.language in ("c", "cxx") and not self.launcher


@dataclass(frozen=True)
class ResolvedTarget:
    name: str
    host: TargetInstance
    device: TargetInstance | None
    accelerators: tuple[TargetInstance, ...]  # priority order

    @property
    def host_kind(self) -> str:
        return self.host.kind

    @property
    def members(self) -> tuple[TargetInstance, ...]:
        """Every instance, in priority order: accelerators, then the device, then the host."""
        return (*self.accelerators, *((self.device,) if self.device else ()), self.host)

    @property
    def backends(self) -> tuple[str, ...]:
        """Kinds that may own regions, in priority order; the host comes last."""
        return tuple(m.kind for m in self.members)

    @property
    def device_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(get_kind(m.kind).device for m in self.members))

    def targets_for(self, device_type: str) -> tuple[TargetInstance, ...]:
        """The members running on `device_type`, in priority order."""
        return tuple(m for m in self.members if get_kind(m.kind).device == device_type)

    def primary(self, device_type: str) -> TargetInstance | None:
        """The device type's primary target: its one member that is not an external codegen
        (the host for the cpu, the device for its type). External codegens compete with it
        for regions but run on the device it owns."""
        for member in self.targets_for(device_type):
            if not get_kind(member.kind).is_external_codegen:
                return member
        return None

    def instance(self, kind: str) -> TargetInstance:
        for inst in self.members:
            if inst.kind == kind:
                return inst
        raise KeyError(f"target {self.name!r} has no {kind!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": TARGET_FORMAT,
            "name": self.name,
            "kind": "composite",
            "host": self.host.as_dict(),
            "device": self.device.as_dict() if self.device else None,
            "accelerators": [a.as_dict() for a in self.accelerators],
        }

    def canonical_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=1) + "\n"

    def digest(self) -> str:
        """sha256 of what the target means; its name is left out, so equal targets under
        two names share a digest."""
        meaning = {k: v for k, v in self.to_dict().items() if k != "name"}
        return hashlib.sha256(json.dumps(meaning, sort_keys=True).encode()).hexdigest()

    def same_as(self, other: ResolvedTarget) -> bool:
        """Equal in meaning, whatever each is called."""
        return dataclasses.replace(other, name=self.name) == self

    def codegen_options(self, kind: str) -> dict[str, Any]:
        """What options/<kind>.json holds: only attributes that change `kind`'s generated
        code, so a compile flag or another backend's option re-runs none of its codegen.
        A module that times its kernels (rules `kernel_times`) in a library built with the
        host's `profile` is told so by `profile: true` in its options."""
        options = {k: _thaw(v)
                   for k, v in self.instance(kind).keep(("partition", "codegen")).attrs}
        if kind != self.host_kind and get_kind(kind).kernel_times and self.profiled:
            options["profile"] = True
        return options

    @property
    def profiled(self) -> bool:
        """Whether the library times its regions (the host's `profile`)."""
        return bool(dict(self.host.attrs).get("profile"))

    def run_options(self, kind: str) -> dict[str, Any]:
        """Attributes that change how `kind`'s tools run, never what they produce."""
        return {k: _thaw(v) for k, v in self.instance(kind).keep(("none",)).attrs}

    def partition_view(self) -> ResolvedTarget:
        """This target keeping only the attributes that can change the partition: what the
        partition stage reads, so a codegen or compile option re-runs no partition."""
        return dataclasses.replace(
            self,
            host=self.host.keep(("partition",)),
            device=self.device.keep(("partition",)) if self.device else None,
            accelerators=tuple(a.keep(("partition",)) for a in self.accelerators),
        )

    def toolchain(self, kind: str) -> Toolchain:
        from buildgen.targets.toolchain import toolchain_for

        if _TOOLCHAINS is None:
            return toolchain_for(self, kind)
        # By identity: hashing a target walks all its attributes, on every call. The entry
        # holds the target, so its id is not reused while the memo lives.
        key = (id(self), kind)
        entry = _TOOLCHAINS.get(key)
        if entry is None:
            entry = _TOOLCHAINS[key] = (self, toolchain_for(self, kind))
        return entry[1]


# Within memoized_toolchains(): gen asks once per action (thousands for a large manifest)
# for a handful of targets, and nothing a toolchain depends on (installed libraries, PATH)
# changes during one gen. Outside it every call looks again.
_TOOLCHAINS: dict[tuple[int, str], tuple[ResolvedTarget, Toolchain]] | None = None


@contextlib.contextmanager
def memoized_toolchains() -> Iterator[None]:
    global _TOOLCHAINS
    outer = _TOOLCHAINS
    _TOOLCHAINS = {} if outer is None else outer
    try:
        yield
    finally:
        _TOOLCHAINS = outer


def target_from_dict(data: dict[str, Any]) -> ResolvedTarget:
    """Read back target.json (or a view of it)."""
    if data.get("format") != TARGET_FORMAT:
        raise ValueError(f"unsupported target file format {data.get('format')!r}")

    def inst(d: dict[str, Any]) -> TargetInstance:
        return TargetInstance.make(d["kind"], {k: v for k, v in d.items() if k != "kind"})

    return ResolvedTarget(
        name=data["name"],
        host=inst(data["host"]),
        device=inst(data["device"]) if data.get("device") else None,
        accelerators=tuple(inst(a) for a in data["accelerators"]),
    )
