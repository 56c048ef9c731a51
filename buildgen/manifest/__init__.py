"""The manifest stage: BUILD.yaml -> a validated, immutable Manifest.

Every problem in the file is reported at once, each located at its line and column.
"""

from __future__ import annotations

import os
from pathlib import Path

from buildgen.errors import BuildgenError, Diagnostic, SourceLocation
from buildgen.manifest.assemble import assemble
from buildgen.manifest.frozen import FrozenDict, FrozenList, freeze, thaw
from buildgen.manifest.load import LoadedDocument, load_yaml, parse_yaml
from buildgen.manifest.model import (
    CacheOptions,
    Manifest,
    ModelSpec,
    PartitionOptions,
    TargetSpec,
)
from buildgen.manifest.semantic import IsKnownTarget, semantic_diagnostics
from buildgen.manifest.sourcemap import NodePath, SourceMap, format_path, sort_diagnostics
from buildgen.manifest.validate import schema_diagnostics

__all__ = [
    "CacheOptions",
    "FrozenDict",
    "FrozenList",
    "IsKnownTarget",
    "LoadedDocument",
    "Manifest",
    "ModelSpec",
    "NodePath",
    "PartitionOptions",
    "SourceMap",
    "TargetSpec",
    "format_path",
    "freeze",
    "load_manifest",
    "load_yaml",
    "parse_yaml",
    "thaw",
]


def _knows_nothing(name: str) -> bool:
    return False


def load_manifest(
    path: str | os.PathLike[str], is_known_target: IsKnownTarget | None = None
) -> Manifest:
    """Read, validate and resolve a manifest; raise one BuildgenError listing every problem.

    ``is_known_target(name)`` says whether a model may name a registered target kind or tag
    that the manifest does not define; by default none is known.
    """
    document = load_yaml(path)
    absolute = Path(os.path.abspath(path))
    if document.data is None and not document.diagnostics:
        location = SourceLocation(document.source_map.file, 1, 1)
        raise BuildgenError(
            Diagnostic("the manifest is empty", location, "start it with 'buildgen: 1'")
        )
    # A value the loader could not read (an unsupported tag, a recursive alias) is None in
    # the data; the loader's own message says why, so the schema's "got null" is dropped.
    unreadable = {d.location for d in document.diagnostics}
    checks = [
        *schema_diagnostics(document.data, document.source_map),
        *semantic_diagnostics(
            document.data, document.source_map, absolute.parent,
            is_known_target or _knows_nothing,
        ),
    ]
    diagnostics = [
        *document.diagnostics,
        *(d for d in checks if d.location is None or d.location not in unreadable),
    ]
    if diagnostics:
        raise BuildgenError(sort_diagnostics(diagnostics))
    assert isinstance(document.data, dict)  # the schema's top-level "type": "object"
    return assemble(document.data, document.source_map, absolute)
