"""Check a kind's attributes as written against its schema; make the filled-in instance.

Every attribute is validated here, once, for every way a target can be written (a kind,
a composite member, a tag's override), and each problem points at the attribute.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from buildgen.errors import Diagnostic
from buildgen.schemacheck import accepts
from buildgen.targets.kinds import TargetKind
from buildgen.targets.model import TargetInstance
from buildgen.targets.registry import get_kind

if TYPE_CHECKING:
    import jsonschema

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
    """The attribute's first sentence and its default: the whole description is in
    `buildgen targets KIND`, and a hint is one line."""
    spec = kind.schema.get("properties", {}).get(name)
    if not isinstance(spec, dict) or "description" not in spec:
        return None
    first = re.split(r"(?<=[a-z0-9)\]]\.)\s+(?=[A-Z])", spec["description"], maxsplit=1)[0]
    first = first.rstrip(".")
    if len(first) > _HINT_CHARS:
        first = first[:_HINT_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + " ..."
    return f"{name}: {first} (default: {describe_value(spec.get('default'))}; see " \
           f"`buildgen targets {kind.name}`)"


_HINT_CHARS = 120


_TYPE_WORDS = {"integer": "an integer", "number": "a number", "string": "a string",
               "boolean": "true or false", "array": "a list", "object": "a mapping",
               "null": "null"}


def _expected(err: jsonschema.ValidationError) -> str:
    """What the schema wanted, in the manifest's words ("expected an integer")."""
    want = err.validator_value
    words: dict[str, Callable[[Any], str]] = {
        "type": lambda v: " or ".join(_TYPE_WORDS.get(t, t) for t in ([v] if isinstance(v, str)
                                                                        else v)),
        "minimum": lambda v: f"at least {v}",
        "maximum": lambda v: f"at most {v}",
        "exclusiveMinimum": lambda v: f"more than {v}",
        "exclusiveMaximum": lambda v: f"less than {v}",
        "enum": lambda v: "one of " + ", ".join(describe_value(x) for x in v),
        "const": describe_value,
        "minItems": lambda v: f"at least {v} item{'s' if v != 1 else ''}",
        "maxItems": lambda v: f"at most {v} item{'s' if v != 1 else ''}",
        "uniqueItems": lambda _: "a list without repeated items",
        "minLength": lambda v: "a non-empty string" if v == 1 else f"at least {v} characters",
        "pattern": lambda v: f"text matching {v}",
    }
    say = words.get(str(err.validator))
    return f"expected {say(want)}, got {describe_value(err.instance)}" if say else err.message


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
    written = {k: v for k, v in attrs.items() if k in known}
    if accepts(kind.schema, written):  # the usual case, without jsonschema (schemacheck.py)
        return found
    import jsonschema

    validator = jsonschema.Draft202012Validator(kind.schema)
    for err in sorted(validator.iter_errors(written), key=lambda e: list(map(str, e.path))):
        path = tuple(err.absolute_path)
        name = str(path[0]) if path else ""
        found.append(site.at(*path).diagnostic(_expected(err), _attribute_hint(kind, name)))
    return found


def make_instance(kind: TargetKind, attrs: Mapping[str, Any]) -> TargetInstance:
    """`kind` with `attrs` over its defaults (attrs must have been checked)."""
    return TargetInstance.make(kind.name, {**kind.defaults(), **attrs})


def default_instance(name: str = DEFAULT_HOST) -> TargetInstance:
    return make_instance(get_kind(name), {})
