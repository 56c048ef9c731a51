"""Build the Manifest dataclasses from data that passed validation."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from buildgen.manifest.frozen import freeze
from buildgen.manifest.model import (
    CacheOptions,
    Manifest,
    ModelSpec,
    PartitionOptions,
    RemoteOptions,
    TargetSpec,
)
from buildgen.manifest.semantic import resolve
from buildgen.manifest.sourcemap import SourceMap

DEFAULT_BUILD_DIR = "build"


def assemble(data: dict[str, Any], source_map: SourceMap, path: Path) -> Manifest:
    """``data`` must have passed schema and semantic checks; ``path`` is absolute."""
    root = path.parent
    defaults = _partition(data.get("partition", {}), root, PartitionOptions())
    models = tuple(
        _model(name, model, root, defaults, source_map)
        for name, model in sorted(data.get("models", {}).items())
    )
    targets = tuple(
        TargetSpec(name, freeze(value), source_map.locate_key(("targets", name)))
        for name, value in sorted(data.get("targets", {}).items())
    )
    return Manifest(
        path=path,
        root=root,
        build_dir=resolve(root, data.get("build_dir", DEFAULT_BUILD_DIR)),
        models=models,
        targets=targets,
        partition=defaults,
        cache=_cache(data.get("cache", {}), root),
        remote=_remote(data["remote"], root) if "remote" in data else None,
        locations=source_map,
    )


def _cache(section: dict[str, Any], root: Path) -> CacheOptions:
    from buildgen.cache.settings import parse_size

    folder = section.get("dir")
    return CacheOptions(
        enabled=bool(section.get("enabled", True)),
        dir=resolve(root, os.path.expanduser(folder)) if folder else None,
        # The schema's pattern admits only sizes parse_size reads.
        max_size=parse_size(section["max_size"]) if "max_size" in section else None,
        remote=section.get("remote"),
        read_only=bool(section.get("read_only", False)),
    )


def _remote(section: dict[str, Any], root: Path) -> RemoteOptions:
    def path(value: str) -> Path:
        return resolve(root, os.path.expanduser(value))

    return RemoteOptions(
        executor=section["executor"],
        instance=section.get("instance", ""),
        platform=tuple(sorted((k, str(v)) for k, v in section.get("platform", {}).items())),
        jobs=section.get("jobs"),
        local_jobs=section.get("local_jobs"),
        timeout=float(section["timeout"]) if "timeout" in section else None,
        token_file=path(section["token_file"]) if "token_file" in section else None,
        tls=tuple(sorted((k, path(v)) for k, v in section.get("tls", {}).items())),
    )


def _model(
    name: str,
    model: dict[str, Any],
    root: Path,
    defaults: PartitionOptions,
    source_map: SourceMap,
) -> ModelSpec:
    inputs = tuple(
        # int(): JSON Schema counts 8.0 as an integer; the IR wants ints.
        (input_name, tuple(int(dim) for dim in shape))
        for input_name, shape in sorted(model.get("inputs", {}).items())
    )
    return ModelSpec(
        name=name,
        source=resolve(root, model["source"]),
        inputs=inputs,
        targets=tuple(model["targets"]),
        pins=tuple(sorted(model.get("pin", {}).items())),
        partition=_partition(model.get("partition", {}), root, defaults),
        location=source_map.locate_key(("models", name)),
    )


def _partition(options: dict[str, Any], root: Path, base: PartitionOptions) -> PartitionOptions:
    changes: dict[str, Any] = {}
    for key in ("policy", "step"):
        if key in options:
            changes[key] = options[key]
    for key in ("records", "file"):
        if key in options:
            changes[key] = resolve(root, options[key])
    return dataclasses.replace(base, **changes)
