"""The text `buildgen targets` prints: kinds with their attributes, then tags."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterable

from buildgen.targets.kinds import Role, TargetKind
from buildgen.targets.model import ResolvedTarget, TargetInstance
from buildgen.targets.registry import has_code_generator, registered_kinds, registered_tags
from buildgen.targets.resolve import resolve_tag

WIDTH = 100


def _role(kind: TargetKind) -> str:
    if kind.role is Role.ACCELERATOR:
        return f"external codegen for {kind.external_codegen_for} ({kind.device})"
    return f"{kind.role.value} ({kind.device})"


def _default(value: object) -> str:
    return json.dumps(value)


def describe_kind(kind: TargetKind) -> str:
    status = "builds" if has_code_generator(kind.name) else "no code generator yet"
    title = kind.title.removeprefix(f"{kind.name}: ")
    lines = [f"{kind.name}: {_role(kind)}; {status}", f"  {title}"]
    attrs = kind.attributes
    name_w = max(len(a.name) for a in attrs) if attrs else 0
    default_w = min(max((len(_default(a.default)) for a in attrs), default=0), 18)
    for attr in attrs:
        default = _default(attr.default)
        head = f"    {attr.name:<{name_w}}  {default:<{default_w}}  {attr.affects:<9}  "
        body = textwrap.wrap(attr.description, WIDTH - len(head)) or [""]
        lines.append(head + body[0])
        lines += [" " * len(head) + more for more in body[1:]]
    return "\n".join(lines)


def summarize(target: ResolvedTarget) -> str:
    """`onednn > c {march: "x86-64-v3"}`: members in priority order, each with the
    attributes that differ from its kind's defaults (inherited ones left out)."""
    parts = []
    for member in target.members:
        kind = registered_kinds()[member.kind]
        defaults = kind.defaults()
        hidden = _inherited(kind, member, target)
        shown = ", ".join(
            f"{k}: {json.dumps(v)}"
            for k, v in sorted(member.as_dict().items())
            if k != "kind" and k not in hidden and defaults[k] != v
        )
        parts.append(f"{member.kind} {{{shown}}}" if shown else member.kind)
    return " > ".join(parts)


def _inherited(kind: TargetKind, member: TargetInstance, target: ResolvedTarget) -> set[str]:
    """Attributes of `member` that hold exactly what they inherit from its host or device."""
    if kind.external_codegen_for is None:
        return set()
    base = dict(target.instance(kind.external_codegen_for).attrs)
    same = set()
    for rule in kind.inherit:
        value, source = member.get(rule.attribute), base.get(rule.source)
        if rule.pattern is not None:
            match = re.search(rule.pattern, str(source))
            source = match.group(1) if match else None
            value = str(value)
        if value == source:
            same.add(rule.attribute)
    return same


def describe_tags(names: Iterable[str]) -> str:
    tags = registered_tags()
    width = max((len(n) for n in names), default=0)
    lines = []
    for name in names:
        tag = tags[name]
        lines.append(f"  {name:<{width}}  {summarize(resolve_tag(name))}")
        lines.append(f"  {'':<{width}}  {tag.description}")
    return "\n".join(lines)


def listing(only: Iterable[str] = ()) -> str:
    """Every kind and tag, or only those named in `only`."""
    wanted = set(only)
    kinds = [k for n, k in registered_kinds().items() if not wanted or n in wanted]
    tags = [n for n in registered_tags() if not wanted or n in wanted]
    out = []
    if kinds:
        out.append("Target kinds: each attribute with its default, the first action a change "
                   "re-runs, and its meaning\n")
        out += [describe_kind(k) + "\n" for k in kinds]
    if tags:
        out.append("Tags (members in priority order, attributes that differ from defaults):\n")
        out.append(describe_tags(tags) + "\n")
    return "\n".join(out)
