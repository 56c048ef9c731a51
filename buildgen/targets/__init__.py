"""Targets: what a model is compiled for, declared once and resolved to a canonical form.

The Python API:
    parse_target(data)                 a kind or tag name, or a mapping as in a manifest
    resolve_target(name, data, ...)    the same, with positions and other named targets
    resolve_tag(name)                  a registered tag's target
    resolve_targets(manifest)          what gen builds (checks code generators too)
    resolve_manifest_target(m, name)   one target of a manifest, as `buildgen targets --show`
    ResolvedTarget.same_as / digest    compare targets by meaning, whatever their names
    get_kind, registered_kinds, registered_tags, is_external_codegen_for
"""

from __future__ import annotations

import json
from pathlib import Path

from buildgen.targets.kinds import Attribute, Role, TargetKind
from buildgen.targets.manifest_targets import resolve_manifest_target, resolve_targets
from buildgen.targets.model import ResolvedTarget, TargetInstance, Toolchain, target_from_dict
from buildgen.targets.registry import (
    definition_files,
    get_kind,
    has_code_generator,
    is_external_codegen_for,
    registered_kinds,
    registered_tags,
    reload_registry,
)
from buildgen.targets.resolve import is_known_target, parse_target, resolve_tag, resolve_target
from buildgen.targets.toolchain import pool_depths


def load_target_file(path: str | Path) -> ResolvedTarget:
    return target_from_dict(json.loads(Path(path).read_text()))


__all__ = [
    "Attribute",
    "ResolvedTarget",
    "Role",
    "TargetInstance",
    "TargetKind",
    "Toolchain",
    "definition_files",
    "get_kind",
    "has_code_generator",
    "is_external_codegen_for",
    "is_known_target",
    "load_target_file",
    "parse_target",
    "pool_depths",
    "registered_kinds",
    "registered_tags",
    "reload_registry",
    "resolve_manifest_target",
    "resolve_tag",
    "resolve_target",
    "resolve_targets",
]
