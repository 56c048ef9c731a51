"""Resolve targets written as data (Python, a tags file) into canonical ResolvedTargets.

The manifest's targets go through manifest_targets.py, which adds the manifest's own
names and positions; both end in `resolve_definition`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from buildgen.errors import BuildgenError, Diagnostic, SourceLocation
from buildgen.manifest.sourcemap import NodePath, sort_diagnostics
from buildgen.targets.compose import Composed, compose
from buildgen.targets.cross import ProjectToolchain
from buildgen.targets.documents import Located, Unlocated
from buildgen.targets.expand import Definition, Expander, Scope, Site, names_a_kind
from buildgen.targets.kinds import Role
from buildgen.targets.model import ResolvedTarget
from buildgen.targets.registry import registered_kinds, registered_tags

Locate = Callable[[NodePath], "SourceLocation | None"]


def tag_definitions() -> dict[str, Definition]:
    return {
        name: Definition(name, tag.data, Site(tag.document, tag.path), "tag")
        for name, tag in registered_tags().items()
    }


def resolve_definition(ex: Expander, definition: Definition,
                       project: ProjectToolchain | None = None) -> Composed | None:
    """One named target, checked as a whole; problems go to `ex.problems`. With `project`,
    a host naming no triple builds for that toolchain (compose.py)."""
    alone = names_a_kind(definition.data)
    if alone is not None and registered_kinds()[alone].role is Role.ACCELERATOR:
        base = registered_kinds()[registered_kinds()[alone].external_codegen_for or ""]
        slot = "device" if base.role is Role.DEVICE else "host"
        ex.fail(definition.site, f"{alone!r} is an external codegen for {base.name!r}: it "
                "cannot be a target on its own",
                f"use it in a composite: {{kind: composite, {slot}: {base.name}, "
                f"accelerators: [{alone}]}}")
        return None
    members = ex.expand(definition)
    if members is None:
        return None
    return compose(ex, definition.name, members, definition.site, project)


def _raise(problems: list[Diagnostic], fallback: str) -> BuildgenError:
    return BuildgenError(sort_diagnostics(problems) or [Diagnostic(fallback)])


def resolve_target(
    name: str,
    data: Any,
    locate: Locate | None = None,
    *,
    definitions: Mapping[str, Any] | None = None,
) -> ResolvedTarget:
    """Resolve `data`, written as in a manifest's `targets.<name>`, with registered tags.

    `locate(path)` places problems (paths start at ("targets", name)); `definitions`
    (name -> data) are further targets it may refer to, as a manifest's other targets.
    """
    document = Located(locate) if locate else Unlocated()
    others = {
        other: Definition(other, value, Site(document, ("targets", other)), "manifest")
        for other, value in (definitions or {}).items()
    }
    ex = Expander(Scope(others, tag_definitions()))
    definition = Definition(name, data, Site(document, ("targets", name)), "manifest")
    composed = resolve_definition(ex, definition)
    if composed is None or ex.problems:
        raise _raise(ex.problems, f"cannot resolve target {name!r}")
    return composed.target


def parse_target(data: Any, name: str = "target") -> ResolvedTarget:
    """The Python API's front door: a kind or tag name, or a mapping as in a manifest.

    >>> parse_target({"tag": "cuda-cutlass", "cutlass": {"split_k_slices": [1, 2]}})
    """
    return resolve_target(name, data)


def resolve_tag(name: str) -> ResolvedTarget:
    """A registered tag's target; a problem in it is reported in its tags file."""
    tags = tag_definitions()
    if name not in tags:
        raise BuildgenError(f"unknown tag {name!r}; tags: {', '.join(sorted(tags))}")
    ex = Expander(Scope({}, tags))
    composed = resolve_definition(ex, tags[name])
    if composed is None or ex.problems:
        raise _raise(ex.problems, f"cannot resolve tag {name!r}")
    return composed.target


def is_known_target(name: str) -> bool:
    """Whether a model may name `name` without defining it: a registered kind or tag. (An
    external codegen's kind is known too, so that naming one alone gets the targets stage's
    precise message rather than "unknown target".)"""
    return name in registered_kinds() or name in registered_tags()
