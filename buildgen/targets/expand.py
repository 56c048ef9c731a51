"""Expand a target as written into its members: filled-in instances, each with its site.

A target may be a kind name, a `{kind: ...}` mapping, a composite, or a tag (registered, or
another target of the manifest) with overrides; composites nest through tags. Expansion
flattens all of that into a list of members; compose.py then checks the list as a whole
(one host, one device, each external codegen's device present) and builds the canonical
target. Every problem is collected, never raised, so one run reports all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from buildgen.errors import Diagnostic, SourceLocation
from buildgen.manifest.sourcemap import NodePath, format_path
from buildgen.targets.attributes import (
    attribute_problems,
    describe_value,
    did_you_mean,
    make_instance,
)
from buildgen.targets.documents import Document
from buildgen.targets.kinds import Role
from buildgen.targets.model import TargetInstance
from buildgen.targets.registry import registered_kinds

COMPOSITE = "composite"
COMPOSITE_KEYS = ("kind", "host", "device", "accelerators")
Members = tuple["Member", ...]


@dataclass(frozen=True)
class Site:
    """Where something was written; `via` names the tag it came through, if any."""

    document: Document
    path: NodePath
    via: str | None = None

    def at(self, *parts: str | int) -> Site:
        return Site(self.document, (*self.path, *parts), self.via)

    def diagnostic(
        self, message: str, hint: str | None = None, *, at_key: bool = False
    ) -> Diagnostic:
        if self.via:
            message = f"{message} (through {self.via})"
        return self.document.diagnostic(self.path, message, hint, at_key=at_key)

    @property
    def location(self) -> SourceLocation | None:
        return self.document.diagnostic(self.path, "").location

    def describe(self) -> str:
        return str(self.location) if self.location else format_path(self.path)


@dataclass(frozen=True)
class Member:
    instance: TargetInstance
    site: Site
    written: frozenset[str] = frozenset()  # attributes set explicitly (the rest: defaults)

    @property
    def kind(self) -> str:
        return self.instance.kind

    @property
    def role(self) -> Role:
        return registered_kinds()[self.instance.kind].role


@dataclass(frozen=True)
class Definition:
    """A named target: a manifest's `targets.<name>`, or a registered tag."""

    name: str
    data: Any
    site: Site
    origin: str  # "manifest" or "tag"

    @property
    def label(self) -> str:
        return f"tag {self.name!r}" if self.origin == "tag" else f"target {self.name!r}"


@dataclass(frozen=True)
class Scope:
    definitions: Mapping[str, Definition]  # the manifest's targets
    tags: Mapping[str, Definition]  # registered tags


def names_a_kind(data: Any) -> str | None:
    """The kind `data` names directly (`cutlass`, `{kind: cutlass, ...}`), if it does."""
    if isinstance(data, str) and data in registered_kinds():
        return data
    if isinstance(data, Mapping) and "tag" not in data:
        kind = data.get("kind")
        if isinstance(kind, str) and kind != COMPOSITE and kind in registered_kinds():
            return kind
    return None


class Expander:
    def __init__(self, scope: Scope):
        self.scope = scope
        self.problems: list[Diagnostic] = []
        self._expanded: dict[tuple[str, str], Members | None] = {}
        self._active: list[tuple[str, str]] = []

    def fail(
        self, site: Site, message: str, hint: str | None = None, *, at_key: bool = False
    ) -> None:
        self.problems.append(site.diagnostic(message, hint, at_key=at_key))

    # -- named definitions -------------------------------------------------------------

    def visible(self, owner: Definition | None) -> dict[str, Definition]:
        """The names a definition may refer to. A registered tag sees only registered tags,
        so a manifest cannot change what a registered tag means; a manifest target sees the
        manifest's other targets first (its own name means the registered tag)."""
        names = dict(self.scope.tags)
        if owner is None or owner.origin != "tag":
            names.update(self.scope.definitions)
            if owner is not None and owner.name in self.scope.definitions:
                if owner.name in self.scope.tags:
                    names[owner.name] = self.scope.tags[owner.name]
                else:
                    del names[owner.name]
        return names

    def expand(self, definition: Definition, use: Site | None = None) -> Members | None:
        key = (definition.origin, definition.name)
        if key in self._active:
            cycle = [n for _, n in self._active[self._active.index(key) :]] + [definition.name]
            self.fail(use or definition.site, f"{definition.label} refers to itself: "
                      + " -> ".join(cycle))
            return None
        if key not in self._expanded:
            self._active.append(key)
            self._expanded[key] = self.entry(definition.data, definition.site, definition)
            self._active.pop()
        return self._expanded[key]

    def reference(
        self, definition: Definition, site: Site, name_site: Site | None = None
    ) -> Members | None:
        """A definition used at `site` (its name written at `name_site`): its members, now
        reported at the use."""
        members = self.expand(definition, name_site or site)
        if members is None:
            return None
        via = Site(site.document, site.path, definition.label)
        return tuple(Member(m.instance, via, m.written) for m in members)

    # -- one entry as written ----------------------------------------------------------

    def entry(self, data: Any, site: Site, owner: Definition | None) -> Members | None:
        if isinstance(data, str):
            return self.named(data, site, owner)
        if not isinstance(data, Mapping):
            self.fail(site, "expected a target kind or tag name, or a mapping with 'kind' or "
                      f"'tag', got {describe_value(data)}")
            return None
        if "tag" in data:
            if "kind" in data:
                self.fail(site, "a target has either a 'kind' or a 'tag', not both", at_key=True)
                return None
            return self.tagged(data, site, owner)
        if data.get("kind") == COMPOSITE:
            return self.composite(data, site, owner)
        if "kind" not in data:
            self.fail(site, "a target needs a 'kind' or a 'tag'", at_key=True)
            return None
        return self.kind_entry(data, site, owner)

    def named(self, name: str, site: Site, owner: Definition | None) -> Members | None:
        if name in registered_kinds():
            return self.kind_entry({"kind": name}, site, owner)
        visible = self.visible(owner)
        if name in visible:
            return self.reference(visible[name], site)
        if name == COMPOSITE:
            self.fail(site, "a composite is written as a mapping: "
                      "{kind: composite, host: ..., device: ..., accelerators: [...]}")
            return None
        choices = [*registered_kinds(), *visible]
        self.fail(site, f"unknown target kind or tag {name!r}",
                  did_you_mean(name, choices) or self._known_names(visible))
        return None

    def _known_names(self, visible: Mapping[str, Definition]) -> str:
        return (f"kinds: {', '.join(sorted(registered_kinds()))}; "
                f"tags: {', '.join(sorted(visible)) or 'none'}")

    def kind_entry(
        self, data: Mapping[str, Any], site: Site, owner: Definition | None
    ) -> Members | None:
        name = data["kind"]
        kinds = registered_kinds()
        if not isinstance(name, str) or name not in kinds:
            where = site.at("kind")
            if isinstance(name, str) and name in self.visible(owner):
                self.fail(where, f"{name!r} is a tag, not a target kind", f"write tag: {name}")
            else:
                self.fail(where, f"unknown target kind {describe_value(name)}",
                          did_you_mean(name, kinds) or f"kinds: {', '.join(sorted(kinds))}")
            return None
        kind = kinds[name]
        attrs = {k: v for k, v in data.items() if k != "kind"}
        problems = attribute_problems(kind, attrs, site)
        if problems:
            self.problems += problems
            return None
        return (Member(make_instance(kind, attrs), site, frozenset(attrs)),)

    def tagged(
        self, data: Mapping[str, Any], site: Site, owner: Definition | None
    ) -> Members | None:
        from buildgen.targets.overrides import apply_overrides

        name = data["tag"]
        where = site.at("tag")
        visible = self.visible(owner)
        if isinstance(name, str) and name in registered_kinds():
            self.fail(where, f"{name!r} is a target kind, not a tag", f"write kind: {name}")
            return None
        if not isinstance(name, str) or name not in visible:
            self.fail(where, f"unknown tag {describe_value(name)}",
                      did_you_mean(name, visible) or f"tags: {', '.join(sorted(visible))}")
            return None
        members = self.reference(visible[name], site, where)
        if members is None:
            return None
        overrides = {k: v for k, v in data.items() if k != "tag"}
        return apply_overrides(self, members, overrides, site, owner, visible[name].label)

    # -- composites ----------------------------------------------------------------------

    def composite(
        self, data: Mapping[str, Any], site: Site, owner: Definition | None
    ) -> Members | None:
        ok = True
        for key in data:
            if key not in COMPOSITE_KEYS:
                self.fail(site.at(key), f"unknown key {key!r} in a composite target",
                          did_you_mean(key, COMPOSITE_KEYS[1:])
                          or "a composite has host, device and accelerators", at_key=True)
                ok = False
        members: list[Member] = []
        for role in (Role.HOST, Role.DEVICE):
            if data.get(role.value) is not None:
                got = self.slot(data[role.value], site.at(role.value), owner, role)
                ok = ok and got is not None
                members += got or ()
        accelerators = self.accelerator_list(data.get("accelerators") or [],
                                             site.at("accelerators"), owner)
        if accelerators is None:
            return None
        return (*members, *accelerators) if ok else None

    def slot(self, data: Any, site: Site, owner: Definition | None, role: Role) -> Members | None:
        """The one host (or device) written at `site`."""
        got = self.entry(data, site, owner)
        if got is None:
            return None
        if len(got) == 1 and got[0].role is role:
            return got
        if len(got) != 1:
            kinds = ", ".join(dict.fromkeys(m.kind for m in got))
            name = data.get("tag") if isinstance(data, Mapping) else data
            what = repr(name) if isinstance(name, str) else "this"
            self.fail(site, f"the {role.value} must be a single {role.value} kind, but {what} "
                      f"expands to a composite of {kinds}",
                      "use the tag as the whole target ({tag: ...}) or name one kind")
            return None
        self._misplaced(got[0], site, role)
        return None

    def _misplaced(self, member: Member, site: Site, slot: Role) -> None:
        kind = registered_kinds()[member.kind]
        place = "an accelerator" if slot is Role.ACCELERATOR else f"the {slot.value}"
        if member.role is Role.ACCELERATOR:
            what = f"an external codegen for {kind.external_codegen_for!r}"
            hint = "list it under accelerators:"
        elif slot is Role.HOST:
            what = f"a {kind.device} device kind (the host runs on the cpu)"
            hint = "put it under device:"
        else:
            what = f"a {member.role.value} kind, not an external codegen" if (
                slot is Role.ACCELERATOR) else "a host kind"
            hint = f"put it under {member.role.value}:"
        self.fail(site, f"{member.kind!r} is {what}, so it cannot be {place}", hint)

    def accelerator_list(self, items: Any, site: Site, owner: Definition | None) -> Members | None:
        """Accelerators in priority order; a composite among them (a tag, or written inline)
        is spliced in at its place."""
        if not isinstance(items, Sequence) or isinstance(items, str):
            self.fail(site, f"expected a list of targets, got {describe_value(items)}")
            return None
        out: list[Member] = []
        ok = True
        for index, item in enumerate(items):
            got = self.entry(item, site.at(index), owner)
            if got is None:
                ok = False
            elif names_a_kind(item) and got[0].role is not Role.ACCELERATOR:
                self._misplaced(got[0], site.at(index), Role.ACCELERATOR)
                ok = False
            else:
                out += got
        return tuple(out) if ok else None
