"""Tags: registered names for targets, read from rules/tags.yaml (and plug-ins' tag files).

A tag's target is written exactly as in a manifest's `targets:` section and resolved by the
same code; it keeps its file and path so a mistake in it is reported at its line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from buildgen.manifest.sourcemap import NodePath
from buildgen.targets.documents import Document, YamlDocument


@dataclass(frozen=True)
class Tag:
    name: str
    description: str
    data: Any  # the target as written
    document: Document
    path: NodePath  # where `data` is in `document`
    file: Path


def load_tags(file: Path, document: YamlDocument) -> tuple[Tag, ...]:
    """The tags of a checked tags file (see schemas/targets/_tags.schema.json)."""
    entries: dict[str, Any] = document.data["tags"]
    return tuple(
        Tag(name, entry["description"], entry["target"], document, ("tags", name, "target"), file)
        for name, entry in sorted(entries.items())
    )
