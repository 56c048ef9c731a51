"""Where target definitions come from, so every problem can point at its line.

Targets are written in a manifest, in a tags file, or in Python. Each source is a
`Document` that turns (path, message) into a located Diagnostic: the Manifest itself, a
YAML file read here, or `Unlocated` for Python data.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from buildgen.errors import BuildgenError, Diagnostic, SourceLocation
from buildgen.manifest.load import parse_yaml
from buildgen.manifest.sourcemap import NodePath, SourceMap, format_path, sort_diagnostics
from buildgen.resources import schemas_dir
from buildgen.schemacheck import accepts


class Document(Protocol):
    def diagnostic(
        self, path: NodePath, message: str, hint: str | None = None, *, at_key: bool = False
    ) -> Diagnostic:
        """``<dotted path>: <message>`` located at the value at `path` (or its key)."""
        ...


@dataclass(frozen=True)
class Unlocated:
    """Targets given as Python data: messages keep their dotted path but have no position."""

    def diagnostic(
        self, path: NodePath, message: str, hint: str | None = None, *, at_key: bool = False
    ) -> Diagnostic:
        return Diagnostic(f"{format_path(path)}: {message}" if path else message, None, hint)


@dataclass(frozen=True)
class Located:
    """A document known only through a `locate(path)` function."""

    locate: Callable[[NodePath], SourceLocation | None]

    def diagnostic(
        self, path: NodePath, message: str, hint: str | None = None, *, at_key: bool = False
    ) -> Diagnostic:
        text = f"{format_path(path)}: {message}" if path else message
        return Diagnostic(text, self.locate(path), hint)


@dataclass(frozen=True)
class YamlDocument:
    """A YAML file of buildgen's own (rules, tags), read with positions."""

    data: Any
    source_map: SourceMap

    def diagnostic(
        self, path: NodePath, message: str, hint: str | None = None, *, at_key: bool = False
    ) -> Diagnostic:
        return self.source_map.diagnostic(path, message, hint, at_key=at_key)


@cache
def meta_schema(name: str) -> dict[str, Any]:
    """schemas/targets/_<name>.schema.json: the shape of a rules or tags file."""
    path = schemas_dir() / "targets" / f"_{name}.schema.json"
    schema: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return schema


def read_yaml_document(path: Path, schema: dict[str, Any] | None) -> YamlDocument:
    """Parse `path` and check it against `schema` (None: buildgen's own files, which the
    tests check); every problem is raised at its position."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BuildgenError(f"cannot read {path}: {exc.strerror}") from None
    loaded = parse_yaml(text, str(path))
    document = YamlDocument(loaded.data, loaded.source_map)
    problems = list(loaded.diagnostics)
    errors: Any = ()
    if schema is not None and not accepts(schema, loaded.data):
        import jsonschema

        errors = jsonschema.Draft202012Validator(schema).iter_errors(loaded.data)
    for err in errors:
        where = tuple(err.absolute_path)
        if err.validator == "additionalProperties" and err.validator_value is False:
            # At each unknown key, with the likely spelling, rather than at the mapping.
            allowed = sorted(err.schema.get("properties", {}))
            for key in err.instance:
                if key not in allowed:
                    close = difflib.get_close_matches(key, allowed, n=1)
                    hint = f"did you mean {close[0]!r}?" if close else f"keys: {', '.join(allowed)}"
                    problems.append(document.diagnostic(
                        (*where, key), f"unknown key {key!r}", hint, at_key=True))
            continue
        problems.append(document.diagnostic(where, err.message))
    if problems:
        raise BuildgenError(sort_diagnostics(problems))
    return document


def load_checked_yaml(path: Path, schema: dict[str, Any] | None) -> dict[str, Any]:
    data = read_yaml_document(path, schema).data
    assert isinstance(data, dict)  # both meta-schemas require an object
    return data
