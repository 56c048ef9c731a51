"""Check a manifest's structure against schemas/manifest.schema.json.

jsonschema's own messages ("'eight' is not of type 'array'", "is not valid under any of the
given schemas") speak about the schema, not the manifest. Each error is rewritten here
into ``<dotted path>: expected <phrase>, got <value>`` using the schema's ``x-expected``
phrases, and located at the offending value (or key) through the SourceMap.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING, Any

from buildgen.errors import Diagnostic
from buildgen.manifest.sourcemap import SourceMap
from buildgen.resources import schemas_dir
from buildgen.schemacheck import accepts

if TYPE_CHECKING:  # jsonschema is imported only for a manifest with a problem
    from jsonschema import Draft202012Validator, ValidationError

SCHEMA_FILE = "manifest.schema.json"


@cache
def manifest_schema() -> dict[str, Any]:
    schema = json.loads((schemas_dir() / SCHEMA_FILE).read_text(encoding="utf-8"))
    return inline_references(schema)


@cache
def manifest_validator() -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(manifest_schema())


def inline_references(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with each `$ref` to a non-recursive `$defs` entry replaced by the entry.

    jsonschema resolves a `$ref` on every visit (tens of µs through `referencing`), and a
    manifest visits `#/$defs/model` once per model. Validation is the same: a `$ref`'s
    siblings (a description) are kept beside the entry's keywords. A recursive entry
    (a composite's accelerators are targets) stays a reference."""
    defs: dict[str, Any] = schema.get("$defs", {})
    inlined: dict[str, Any] = {}
    while True:  # a fixpoint: an entry is inlined once every entry it names is
        ready = {f"#/$defs/{name}": body for name, body in defs.items()
                 if f"#/$defs/{name}" not in inlined and not _references(body, inlined)}
        if not ready:
            break
        inlined.update({ref: _inline(body, inlined) for ref, body in ready.items()})
    return _inline(schema, inlined)


def _references(node: object, known: dict[str, Any]) -> bool:
    """Whether `node` holds a `$ref` not in `known`."""
    if isinstance(node, dict):
        if "$ref" in node and node["$ref"] not in known:
            return True
        return any(_references(v, known) for v in node.values())
    if isinstance(node, list):
        return any(_references(v, known) for v in node)
    return False


def _inline(node: Any, inlined: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if node.get("$ref") in inlined:
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return {**siblings, **inlined[node["$ref"]]}
        return {k: _inline(v, inlined) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, inlined) for v in node]
    return node


def schema_diagnostics(data: object, source_map: SourceMap) -> list[Diagnostic]:
    """Every schema violation in ``data``, one diagnostic per problem (unsorted)."""
    if accepts(manifest_schema(), data):  # the usual case, without jsonschema (schemacheck.py)
        return []
    diagnostics: list[Diagnostic] = []
    for error in manifest_validator().iter_errors(data):
        diagnostics.extend(_convert(error, source_map))
    return diagnostics


def describe(value: object) -> str:
    """A value as the user wrote it in YAML, short enough for one message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping" if value else "an empty mapping"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    return str(value)


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    close = _closest(word, choices)
    return f"did you mean '{close}'?" if close else None


def _closest(word: str, choices: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(word, sorted(choices), n=1)
    return close[0] if close else None


def _convert(error: ValidationError, source_map: SourceMap) -> list[Diagnostic]:
    path = tuple(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    if "x-message" in schema:
        return [source_map.diagnostic(path, schema["x-message"], at_key=True)]
    if error.validator == "additionalProperties" and error.validator_value is False:
        return _unknown_keys(error, source_map)
    if error.validator == "required":
        return _missing_keys(error, source_map)
    if error.validator in ("oneOf", "anyOf"):
        branch = _only_fitting_branch(error)
        if branch is not None:
            return [d for sub in branch for d in _convert(sub, source_map)]
    expected = schema.get("x-expected")
    if expected is None:
        # Every node of the shipped schema that can fail carries a phrase; this keeps a
        # newly added one usable until it gets its own.
        return [source_map.diagnostic(path, error.message)]
    hint = None
    if error.validator == "enum" and isinstance(error.instance, str):
        hint = did_you_mean(error.instance, (str(v) for v in error.validator_value))
    message = f"expected {expected}, got {describe(error.instance)}"
    return [source_map.diagnostic(path, message, hint)]


def _unknown_keys(error: ValidationError, source_map: SourceMap) -> list[Diagnostic]:
    """One diagnostic per unknown key, each at the key itself, with a likely spelling."""
    path = tuple(error.absolute_path)
    allowed = sorted(error.schema.get("properties", {}))
    what = "unknown key" if path else "unknown top-level key"
    diagnostics = []
    for key in error.instance:
        if key in allowed:
            continue
        hint = did_you_mean(key, allowed) or f"allowed keys: {', '.join(allowed)}"
        diagnostics.append(
            source_map.diagnostic(path, f"{what} '{key}'", hint, at_key=True, at=path + (key,))
        )
    return diagnostics


def _missing_keys(error: ValidationError, source_map: SourceMap) -> list[Diagnostic]:
    # jsonschema raises one error per missing key with no field naming it; listing all the
    # missing keys each time and letting identical diagnostics collapse avoids parsing text.
    path = tuple(error.absolute_path)
    properties = error.schema.get("properties", {})
    # A misspelt key ('sorce') is one mistake: its "unknown key … did you mean 'source'?"
    # already says what is missing, so "missing required key 'source'" would only repeat it.
    misspelt = {_closest(key, properties) for key in error.instance if key not in properties}
    return [
        source_map.diagnostic(
            path, f"missing required key '{key}'", properties.get(key, {}).get("x-hint"),
            at_key=True,
        )
        for key in error.validator_value
        if key not in error.instance and key not in misspelt
    ]


def _only_fitting_branch(error: ValidationError) -> list[ValidationError] | None:
    """The errors of the one oneOf/anyOf branch whose type fits the value, if exactly one does.

    A string where a list-or-mapping is allowed fits neither branch: the caller then reports
    the parent's phrase. A mapping with a bad attribute fits the mapping branch only: its
    precise errors are better than "not valid under any of the given schemas".
    """
    branches: dict[int, list[ValidationError]] = {}
    for sub in error.context or ():
        branches.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
    if len(branches) < len(error.validator_value):
        return None  # some branch passed: oneOf failed because several did
    fitting = [
        errors
        for errors in branches.values()
        if not any(e.validator == "type" and not e.relative_path for e in errors)
    ]
    return fitting[0] if len(fitting) == 1 else None
