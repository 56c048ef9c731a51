"""Targets: registered kinds, composite resolution, canonical form."""

from __future__ import annotations

import json
from pathlib import Path

from buildgen.targets.kinds import TargetKind, get_kind, registered_kinds
from buildgen.targets.model import ResolvedTarget, TargetInstance, Toolchain, target_from_dict
from buildgen.targets.resolve import is_known_target, resolve_target, resolve_targets


def load_target_file(path: str | Path) -> ResolvedTarget:
    return target_from_dict(json.loads(Path(path).read_text()))


__all__ = [
    "ResolvedTarget",
    "TargetInstance",
    "TargetKind",
    "Toolchain",
    "get_kind",
    "is_known_target",
    "load_target_file",
    "registered_kinds",
    "resolve_target",
    "resolve_targets",
]
