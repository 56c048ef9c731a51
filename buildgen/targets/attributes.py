"""Check a kind's attributes as written against its schema; make the filled-in instance.

Every attribute is validated here, once, for every way a target can be written (a kind,
a composite member, a tag's override), and each problem points at the attribute.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import jsonschema

from buildgen.errors import Diagnostic
from buildgen.targets.kinds import TargetKind
from buildgen.targets.model import TargetInstance
from buildgen.targets.registry import get_kind

if TYPE_CHECKING:
    from buildgen.targets.expand import Site

# The host of a composite that names none: explicit or this, never guessed from a device.
DEFAULT_HOST = "c"


def did_you_mean(word: object, choices: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(str(word), sorted(choices), n=1)
    return f"did you mean {close[0]!r}?" if close else None


def describe_value(value: object) -> str:
    """A value as it is written in YAML, for messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(describe_value(v) for v in value) + "]"
    return repr(value)


def _attribute_hint(kind: TargetKind, name: str) -> str | None:
    spec = kind.schema.get("properties", {}).get(name)
    if not isinstance(spec, dict) or "description" not in spec:
        return None
    return f"{name}: {spec['description']} (default: {describe_value(spec.get('default'))})"


def attribute_problems(kind: TargetKind, attrs: Mapping[str, Any], site: Site) -> list[Diagnostic]:
    """Problems of `attrs` (attribute -> value, without 'kind') for `kind`, each located at
    its attribute."""
    found: list[Diagnostic] = []
    known = [a.name for a in kind.attributes]
    for key in attrs:
        if key not in known:
            hint = did_you_mean(key, known) or f"{kind.name} takes: {', '.join(known)}"
            found.append(
                site.at(key).diagnostic(
                    f"unknown attribute {key!r} for kind {kind.name!r}", hint, at_key=True
                )
            )
    validator = jsonschema.Draft202012Validator(kind.schema)
    written = {k: v for k, v in attrs.items() if k in known}
    for err in sorted(validator.iter_errors(written), key=lambda e: list(map(str, e.path))):
        path = tuple(err.absolute_path)
        name = str(path[0]) if path else ""
        found.append(site.at(*path).diagnostic(err.message, _attribute_hint(kind, name)))
    return found


def make_instance(kind: TargetKind, attrs: Mapping[str, Any]) -> TargetInstance:
    """`kind` with `attrs` over its defaults (attrs must have been checked)."""
    return TargetInstance.make(kind.name, {**kind.defaults(), **attrs})


def default_instance(name: str = DEFAULT_HOST) -> TargetInstance:
    return make_instance(get_kind(name), {})
