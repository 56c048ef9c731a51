"""The registry of target kinds and tags: buildgen's own, then those of installed plug-ins.

A folder of definitions holds `rules/*.yaml` (one per kind, plus tag files) and
`schemas/targets/<kind>.schema.json`. buildgen's own folders come from
buildgen.resources; a plug-in adds one through the `buildgen.kinds` entry-point group,
naming a module (its folder is used) or a function returning the folder. Its Python code
is named in its rules (`backend: module:Class`) or registered under `buildgen.backends`.
Nothing is registered by importing a module, and a name defined twice is an error.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import BuildgenError
from buildgen.resources import rules_dir, schemas_dir
from buildgen.targets.documents import load_checked_yaml, meta_schema, read_yaml_document
from buildgen.targets.entrypoints import GROUPS, entry_points
from buildgen.targets.entrypoints import forget as forget_entry_points
from buildgen.targets.kinds import TargetKind, load_kind
from buildgen.targets.tags import Tag, load_tags

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

KINDS_GROUP, BACKENDS_GROUP = GROUPS
SHIPPED = "buildgen"  # the origin of the definitions buildgen ships


@dataclass(frozen=True)
class DefinitionFolder:
    rules: Path  # rules/*.yaml
    schemas: Path  # holds targets/<kind>.schema.json
    origin: str  # "buildgen" or the plug-in's entry point, for messages


@dataclass(frozen=True)
class Registry:
    kinds: Mapping[str, TargetKind]
    tags: Mapping[str, Tag]
    files: tuple[Path, ...]  # every file read: a change to one must re-run gen


def _plugin_folder(ep: EntryPoint) -> Path:
    what = f"entry point {ep.name!r} ({ep.value}) of group {KINDS_GROUP!r}"
    try:
        obj = ep.load()
    except Exception as exc:  # a broken plug-in must say which one, whatever it raised
        raise BuildgenError(f"{what}: cannot load: {exc}") from exc
    if isinstance(obj, types.ModuleType):
        folder = Path(obj.__file__ or "").parent
    elif callable(obj):
        folder = Path(obj())
    else:
        folder = Path(obj)
    if not (folder / "rules").is_dir():
        raise BuildgenError(f"{what}: {folder} has no rules/ folder of target kinds")
    return folder


def definition_folders() -> tuple[DefinitionFolder, ...]:
    folders = [DefinitionFolder(rules_dir(), schemas_dir(), SHIPPED)]
    for ep in sorted(entry_points(group=KINDS_GROUP), key=lambda e: (e.name, e.value)):
        folder = _plugin_folder(ep)
        folders.append(DefinitionFolder(folder / "rules", folder / "schemas", ep.name))
    return tuple(folders)


def _read(folders: tuple[DefinitionFolder, ...]) -> Registry:
    kinds: dict[str, TargetKind] = {}
    tags: dict[str, Tag] = {}
    files: list[Path] = []
    for folder in folders:
        for path in sorted(folder.rules.glob("*.yaml")):
            files.append(path)
            # buildgen's own files are checked against the meta-schemas by its tests; a
            # plug-in's, here (jsonschema's checks are most of a registry load).
            shipped = folder.origin == SHIPPED
            if path.stem == "tags":
                document = read_yaml_document(path, None if shipped else meta_schema("tags"))
                for tag in load_tags(path, document):
                    _check_new(tag.name, path, tags[tag.name].file if tag.name in tags else None)
                    tags[tag.name] = tag
                continue
            schema_file = folder.schemas / "targets" / f"{path.stem}.schema.json"
            data = load_checked_yaml(path, None if shipped else meta_schema("rules"))
            kind = load_kind(path, schema_file, data, shipped=shipped)
            _check_new(kind.name, path, kinds[kind.name].rules_file if kind.name in kinds else None)
            kinds[kind.name] = kind
            files.append(schema_file)
    for name, tag in sorted(tags.items()):
        if name in kinds:
            raise BuildgenError(f"{tag.file}: tag {name!r} has the name of a target kind")
    for kind in kinds.values():
        base = kind.external_codegen_for
        if base is not None and (base not in kinds or kinds[base].is_external_codegen):
            raise BuildgenError(
                f"{kind.rules_file}: external_codegen_for: {base!r} is not a host or device kind"
            )
    return Registry(dict(sorted(kinds.items())), dict(sorted(tags.items())), tuple(files))


def _check_new(name: str, path: Path, previous: Path | None) -> None:
    if previous is not None:
        raise BuildgenError(f"{path}: {name!r} is already defined by {previous}")


@cache
def registry() -> Registry:
    return _read(definition_folders())


def reload_registry() -> None:
    """Forget what was read: after installing a plug-in in this process, or in tests."""
    registry.cache_clear()
    _backend_entry_points.cache_clear()
    forget_entry_points()


def registered_kinds() -> Mapping[str, TargetKind]:
    return registry().kinds


def registered_tags() -> Mapping[str, Tag]:
    return registry().tags


def get_kind(name: str) -> TargetKind:
    kinds = registered_kinds()
    if name not in kinds:
        raise BuildgenError(
            f"unknown target kind {name!r}; known kinds: {', '.join(sorted(kinds))}"
        )
    return kinds[name]


def is_external_codegen_for(kind: str, device_kind: str) -> bool:
    """Whether `kind` is an external codegen generating code for `device_kind`'s device:
    (cutlass, cuda) and (onednn, c) are; (cutlass, c) and (cuda, cuda) are not."""
    return get_kind(kind).external_codegen_for == device_kind


@cache
def _backend_entry_points() -> frozenset[str]:
    return frozenset(ep.name for ep in entry_points(group=BACKENDS_GROUP))


def has_code_generator(kind: str) -> bool:
    """Whether buildgen can generate code for `kind` (without importing it)."""
    return get_kind(kind).backend is not None or kind in _backend_entry_points()


def definition_files() -> tuple[Path, ...]:
    """Every rules, tags and schema file read, plug-ins' included: gen's inputs."""
    return tuple(sorted(set(registry().files)))
