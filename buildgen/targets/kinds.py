"""The registry of target kinds, read from rules/<kind>.yaml and schemas/targets/<kind>.schema.json.

A kind is declared once, declaratively; code asks the registry, never a kind's name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from buildgen.errors import error
from buildgen.resources import rules_dir, schemas_dir

RULES_FORMAT = 1


@dataclass(frozen=True)
class ToolchainRule:
    language: str  # "c", "cxx" or "cuda"
    compiler: str  # a template over the kind's attributes, e.g. "{cc}"
    flags: tuple[str, ...]
    optional_flags: tuple[tuple[str, str], ...]  # (attribute, template) emitted when set
    extra_flags_attr: str | None
    link_flags: tuple[str, ...]
    extra_link_flags_attr: str | None
    pool: str | None = None


@dataclass(frozen=True)
class Attribute:
    name: str
    default: Any
    description: str
    affects: str  # "codegen", "compile" or "link": which actions a change re-runs


@dataclass(frozen=True)
class TargetKind:
    name: str
    device: str  # "cpu" or "cuda"
    is_external_codegen: bool
    external_codegen_for: str | None  # the device kind it generates code for
    backend: str  # "module:Class" implementing buildgen.backends.base.Backend
    toolchain: ToolchainRule
    schema: dict[str, Any]
    rules_file: Path
    schema_file: Path

    @property
    def attributes(self) -> tuple[Attribute, ...]:
        props = self.schema.get("properties", {})
        return tuple(
            Attribute(name, spec.get("default"), spec.get("description", ""), spec["x-affects"])
            for name, spec in sorted(props.items())
            if name != "kind"
        )

    def defaults(self) -> dict[str, Any]:
        return {a.name: a.default for a in self.attributes}


def _toolchain(data: dict[str, Any]) -> ToolchainRule:
    return ToolchainRule(
        language=data["language"],
        compiler=data["compiler"],
        flags=tuple(data.get("flags", ())),
        optional_flags=tuple(sorted(data.get("optional_flags", {}).items())),
        extra_flags_attr=data.get("extra_flags_attr"),
        link_flags=tuple(data.get("link_flags", ())),
        extra_link_flags_attr=data.get("extra_link_flags_attr"),
        pool=data.get("pool"),
    )


def load_kind(rules_file: Path, schema_file: Path) -> TargetKind:
    data = yaml.safe_load(rules_file.read_text())
    if data.get("format") != RULES_FORMAT:
        raise error(f"{rules_file}: unsupported rules format {data.get('format')!r}")
    if not schema_file.is_file():
        raise error(f"{rules_file}: kind {data['kind']!r} has no schema at {schema_file}")
    return TargetKind(
        name=data["kind"],
        device=data["device"],
        is_external_codegen=bool(data.get("is_external_codegen", False)),
        external_codegen_for=data.get("external_codegen_for"),
        backend=data["backend"],
        toolchain=_toolchain(data["toolchain"]),
        schema=json.loads(schema_file.read_text()),
        rules_file=rules_file,
        schema_file=schema_file,
    )


@cache
def registered_kinds() -> dict[str, TargetKind]:
    kinds: dict[str, TargetKind] = {}
    for rules_file in sorted(rules_dir().glob("*.yaml")):
        kind = load_kind(rules_file, schemas_dir() / "targets" / f"{rules_file.stem}.schema.json")
        kinds[kind.name] = kind
    return kinds


def get_kind(name: str) -> TargetKind:
    kinds = registered_kinds()
    if name not in kinds:
        raise error(f"unknown target kind {name!r}; known kinds: {', '.join(sorted(kinds))}")
    return kinds[name]


def definition_files() -> tuple[Path, ...]:
    """Every file the registry reads: the generator re-runs when one changes."""
    return tuple(
        sorted(p for k in registered_kinds().values() for p in (k.rules_file, k.schema_file))
    )
