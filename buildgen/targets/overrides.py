"""Overrides on a tag reference: `{tag: x86-onednn, host: {opt_level: 2}, onednn: {threads: 4}}`.

Keys and what they do:
  host / device      a mapping of attributes (kind optional) changes that member's
                     attributes; a different kind, a kind name or a tag replaces the member
  accelerators       replaces the tag's accelerators, in the order given
  <kind>             a mapping of attributes for the member of that kind
Anything else is an error: a tag's members are changed by naming them, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from buildgen.targets.attributes import attribute_problems, default_instance, describe_value
from buildgen.targets.kinds import Role
from buildgen.targets.registry import get_kind, registered_kinds

if TYPE_CHECKING:
    from buildgen.targets.expand import Definition, Expander, Member, Members, Site

_HINT = ("override a member's attributes with host: {...}, device: {...} or <kind>: {...}, "
         "or replace the accelerators with accelerators: [...]")


def apply_overrides(
    ex: Expander,
    members: Members,
    overrides: Mapping[str, Any],
    site: Site,
    owner: Definition | None,
    label: str,
) -> Members | None:
    """`members` of the tag named `label` with `overrides` (written at `site`) applied."""
    out = list(members)
    ok = True
    for key, value in overrides.items():
        at = site.at(key)
        if key == "accelerators":
            new = ex.accelerator_list(value, at, owner)
            ok = ok and new is not None
            out = [m for m in out if m.role is not Role.ACCELERATOR] + list(new or ())
        elif key in (Role.HOST.value, Role.DEVICE.value):
            changed = _slot_override(ex, out, Role(key), value, at, owner, label)
            ok = ok and changed is not None
            out = changed or out
        elif key in registered_kinds():
            index = next((i for i, m in enumerate(out) if m.kind == key), None)
            if index is None:
                have = ", ".join(m.kind for m in out)
                ex.fail(at, f"{label} has no {key!r} to override; it has {have}", at_key=True)
                ok = False
                continue
            merged = _merge(ex, out[index], value, at)
            ok = ok and merged is not None
            out[index] = merged or out[index]
        else:
            ex.fail(at, f"unknown key {key!r} on a reference to {label}", _HINT, at_key=True)
            ok = False
    return tuple(out) if ok else None


def _slot_override(
    ex: Expander,
    members: list[Member],
    role: Role,
    value: Any,
    at: Site,
    owner: Definition | None,
    label: str,
) -> list[Member] | None:
    from buildgen.targets.expand import Member

    current = next((i for i, m in enumerate(members) if m.role is role), None)
    if isinstance(value, Mapping) and "tag" not in value:
        kind = value.get("kind")
        if current is not None and kind in (None, members[current].kind):
            merged = _merge(ex, members[current], value, at)
            return None if merged is None else [*members[:current], merged, *members[current + 1:]]
        if current is None and kind is None:
            if role is not Role.HOST:
                ex.fail(at, f"{label} has no {role.value} to override",
                        f"name the {role.value}'s kind: {role.value}: {{kind: ..., ...}}")
                return None
            # The tag's host was defaulted: the override applies to that default host.
            merged = _merge(ex, Member(default_instance(), at), value, at)
            return None if merged is None else [*members, merged]
    replacement = ex.slot(value, at, owner, role)
    if replacement is None:
        return None
    return [m for m in members if m.role is not role] + list(replacement)


def _merge(ex: Expander, member: Member, value: Any, at: Site) -> Member | None:
    from buildgen.targets.expand import Member

    if not isinstance(value, Mapping):
        ex.fail(at, f"expected a mapping of {member.kind} attributes, got {describe_value(value)}")
        return None
    if value.get("kind", member.kind) != member.kind:
        ex.fail(at.at("kind"), f"this overrides the {member.kind!r} member; its kind stays "
                f"{member.kind!r}", "to replace a member, use its role: host: or device:")
        return None
    attrs = {k: v for k, v in value.items() if k != "kind"}
    problems = attribute_problems(get_kind(member.kind), attrs, at)
    if problems:
        ex.problems += problems
        return None
    return Member(member.instance.with_attrs(attrs), member.site, member.written | set(attrs))
