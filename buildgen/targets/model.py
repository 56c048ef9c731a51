"""Resolved targets: the canonical form every later stage reads (target.json)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from buildgen.targets.kinds import get_kind

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


@dataclass(frozen=True)
class Toolchain:
    """How to compile and link one backend's module, resolved from its rules file."""

    language: str
    cc: str
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...]
    pool: str | None


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
    def backends(self) -> tuple[str, ...]:
        """Kinds that may own regions: accelerators in priority order, then the host."""
        return tuple(a.kind for a in self.accelerators) + (self.host.kind,)

    def instance(self, kind: str) -> TargetInstance:
        for inst in (*self.accelerators, self.host, *((self.device,) if self.device else ())):
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

    def codegen_options(self, kind: str) -> dict[str, Any]:
        """Only the attributes that change generated code, so other edits don't re-run codegen."""
        inst = self.instance(kind)
        affects = {a.name: a.affects for a in get_kind(kind).attributes}
        return {k: _thaw(v) for k, v in inst.attrs if affects.get(k) == "codegen"}

    def toolchain(self, kind: str) -> Toolchain:
        rule = get_kind(kind).toolchain
        attrs = dict(self.instance(kind).attrs)
        # Compile flags come from the backend that generated the code; the host's
        # compiler settings are shared by every C module of the target.
        host_attrs = dict(self.host.attrs)
        merged = {**host_attrs, **attrs}
        cflags = [f.format(**merged) for f in rule.flags]
        cflags += [tmpl.format(**merged) for attr, tmpl in rule.optional_flags if merged.get(attr)]
        if rule.extra_flags_attr:
            cflags += list(merged.get(rule.extra_flags_attr) or ())
        ldflags = [f.format(**merged) for f in rule.link_flags]
        if rule.extra_link_flags_attr:
            ldflags += list(merged.get(rule.extra_link_flags_attr) or ())
        return Toolchain(
            language=rule.language,
            cc=rule.compiler.format(**merged),
            cflags=tuple(cflags),
            ldflags=tuple(ldflags),
            pool=rule.pool,
        )


def target_from_dict(data: dict[str, Any]) -> ResolvedTarget:
    """Read back target.json."""
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
