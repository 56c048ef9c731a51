"""From a target's members to its canonical form: one host, at most one device, the
accelerators in priority order, every attribute filled.

The rules, checked here and nowhere else:
  * one host: written, or the default (c); never guessed from a device. Nested composites
    (tags) may each bring one: of one kind, they are one host holding every attribute any
    of them writes (defaults yield); two writing one attribute differently, or two kinds,
    are an error.
  * at most one device, by the same rule. Among the members of one device type, the one
    that is not an external codegen is that device type's primary target.
  * an external codegen needs the kind it generates code for (cutlass: a cuda device;
    onednn: a c host) in the same composite.
  * an accelerator appears once, its copies combined by the same rule; the first place it
    is listed is its priority.
  * an external codegen's unset attributes that its rules inherit are filled from its host
    or device, so its options are complete on their own.
  * a host naming a triple (rules' `cross`) gets that triple's compiler when it names none;
    with another architecture's triple, no member may be a kind that builds only for the
    build machine (rules' `native_only`), and ISA levels must be the triple's.
  * given the build's toolchain (a CMake cross build's, cross.ProjectToolchain), a host
    naming no triple takes the toolchain's triple and compiler before those checks.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from buildgen.targets.attributes import DEFAULT_HOST, default_instance
from buildgen.targets.cross import (
    ProjectToolchain,
    build_arch,
    is_foreign,
    rule_triple,
    target_arch,
)
from buildgen.targets.expand import Expander, Member, Site
from buildgen.targets.kinds import Role, TargetKind
from buildgen.targets.model import ResolvedTarget, TargetInstance
from buildgen.targets.registry import get_kind


@dataclass(frozen=True)
class Composed:
    target: ResolvedTarget
    sites: tuple[tuple[str, Site], ...]  # kind -> where it was written, for later checks

    def site(self, kind: str) -> Site:
        return dict(self.sites)[kind]


def compose(ex: Expander, name: str, members: tuple[Member, ...], site: Site,
            project: ProjectToolchain | None = None) -> Composed | None:
    """`members` as target `name`; with `project`, a host naming no triple follows it."""
    host_ok, host = _one(ex, [m for m in members if m.role is Role.HOST], Role.HOST)
    device_ok, device = _one(ex, [m for m in members if m.role is Role.DEVICE], Role.DEVICE)
    accelerators = _accelerators(ex, [m for m in members if m.role is Role.ACCELERATOR])
    if not (host_ok and device_ok) or accelerators is None:
        return None
    if host is None:
        host = Member(default_instance(DEFAULT_HOST), site)
    others = [*accelerators, *((device,) if device else ())]
    followed = _follow_project(host, project)
    if followed is not host:
        host = followed
    else:
        project = None  # the host's own triple: messages need not name the project's
    if not _cross_ok(ex, name, host, others, project):
        return None
    host = _cross_compiler(host)
    if device is not None:
        device = _device_follows_host(host, device)
    filled: list[Member] = []
    for acc in accelerators:
        kind = get_kind(acc.kind)
        base = next((m for m in (host, device) if m and m.kind == kind.external_codegen_for), None)
        if base is None:
            ex.fail(acc.site, *_missing_base(kind, host, device))
            continue
        filled.append(Member(_inherit(kind, acc.instance, base.instance), acc.site, acc.written))
    if len(filled) != len(accelerators):
        return None
    target = ResolvedTarget(
        name,
        host.instance,
        device.instance if device else None,
        tuple(a.instance for a in filled),
    )
    everyone = (*filled, *((device,) if device else ()), host)
    return Composed(target, tuple((m.kind, m.site) for m in everyone))


def _one(ex: Expander, candidates: list[Member], role: Role) -> tuple[bool, Member | None]:
    """(no conflict, the one member of `role` or None); a conflict is reported."""
    if not candidates:
        return True, None
    first = candidates[0]
    ok = True
    for other in candidates[1:]:
        if other.kind != first.kind:
            ex.fail(other.site, f"a composite has one {role.value}: {first.kind!r} "
                    f"(at {first.site.describe()}) and {other.kind!r} compete",
                    f"keep one {role.value}; a tag's {role.value} is changed with "
                    f"{{tag: ..., {role.value}: ...}}")
            ok = False
            continue
        first, conflicts = _combine(first, other)
        if conflicts:
            ex.fail(other.site, f"this {role.value} {other.kind!r} differs from the "
                    f"{role.value} at {first.site.describe()} in {conflicts}",
                    f"a composite has one {role.value}: make them agree, or change a tag's "
                    f"{role.value} with {{tag: ..., {role.value}: {{...}}}}")
            ok = False
    return ok, first


def _combine(a: Member, b: Member) -> tuple[Member, str]:
    """`a` and `b` (one kind) as one member: what either writes, the defaults elsewhere.
    Also the attributes both write differently, described ('' when they agree)."""
    left, right = dict(a.instance.attrs), dict(b.instance.attrs)
    clash = sorted(k for k in a.written & b.written if left[k] != right[k])
    taken = {k: right[k] for k in b.written - a.written}
    merged = Member(a.instance.with_attrs(taken), a.site, a.written | b.written)
    return merged, ", ".join(f"{k} ({_show(left[k])} there, {_show(right[k])} here)"
                             for k in clash)


def _show(value: object) -> str:
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def _accelerators(ex: Expander, candidates: list[Member]) -> list[Member] | None:
    kept: dict[str, Member] = {}
    ok = True
    for member in candidates:
        earlier = kept.get(member.kind)
        if earlier is None:
            kept[member.kind] = member
            continue
        kept[member.kind], conflicts = _combine(earlier, member)
        if conflicts:
            ex.fail(member.site, f"accelerator {member.kind!r} is listed twice with different "
                    f"attributes: {conflicts}",
                    f"its first place ({earlier.site.describe()}) is its priority; "
                    "keep one, with the attributes you want")
            ok = False
    return list(kept.values()) if ok else None


def _missing_base(
    kind: TargetKind, host: Member, device: Member | None
) -> tuple[str, str]:
    base = get_kind(kind.external_codegen_for or "")
    if base.role is Role.DEVICE:
        have = f"its device is {device.kind!r}" if device else "it has no device"
        return (
            f"{kind.name!r} is external codegen for {base.name!r}, but this composite has no "
            f"{base.name!r} device ({have})",
            f"add device: {{kind: {base.name}}} to the composite",
        )
    return (
        f"{kind.name!r} is external codegen for {base.name!r}, but this composite's host is "
        f"{host.kind!r}",
        f"use host: {{kind: {base.name}}}",
    )


def _follow_project(host: Member, project: ProjectToolchain | None) -> Member:
    """`host` building for the project's toolchain when it names no triple itself: the
    toolchain's triple and compiler, and its sysroot and emulator where the host sets none.
    What it takes counts as written (so _cross_compiler keeps the project's compiler)."""
    kind = get_kind(host.kind)
    rule = kind.toolchain.cross
    if project is None or rule is None or rule_triple(rule, dict(host.instance.attrs)):
        return host
    changes: dict[str, object] = {rule.triple_attr: project.triple}
    if project.cc:
        changes[rule.compiler_attr] = project.cc
    names = {a.name for a in kind.attributes}
    for attr, value in (("sysroot", project.sysroot), ("emulator", project.emulator)):
        if value is not None and attr in names and attr not in host.written:
            changes[attr] = value
    return Member(host.instance.with_attrs(changes), host.site, host.written | set(changes))


def _cross_ok(ex: Expander, name: str, host: Member, others: list[Member],
              project: ProjectToolchain | None) -> bool:
    """Whether the host's triple (if any) and the other members go together; each problem
    is reported at the member (or attribute) to change. `project`: the triple is the
    project toolchain's, not the manifest's."""
    kind = get_kind(host.kind)
    attrs = dict(host.instance.attrs)
    triple = rule_triple(kind.toolchain.cross, attrs)
    if triple is None:
        return _levels_ok(ex, host, build_arch(), f"architecture ({build_arch()}, this machine's)")
    ok = True
    arch = target_arch(triple)
    where = f"triple {triple!r} ({arch}; this machine is {build_arch()})"
    if project is not None:
        where += f", which {project.origin} builds for"
    if is_foreign(triple):
        for member in others:
            reason = get_kind(member.kind).native_only
            if reason is None:
                continue
            slot = "device" if member.role is Role.DEVICE else "accelerators"
            if project is not None:
                hint = (f"drop {member.kind!r} from the composite's {slot} (the {host.kind} "
                        f"host alone builds for {triple}); or leave target {name!r} out of "
                        f"this build{project.leave_out}")
            else:
                hint = (f"drop {member.kind!r} from the composite's {slot} and build for "
                        f"{triple} with the {host.kind} host alone ({{kind: {host.kind}, "
                        f"triple: {triple}}}); or build on an {arch} machine without the "
                        "triple")
            ex.fail(member.site, f"{member.kind!r} cannot build for the host's {where}: "
                    f"{reason}", hint)
            ok = False
    return _levels_ok(ex, host, arch, where) and ok


def _levels_ok(ex: Expander, host: Member, arch: str, where: str) -> bool:
    """Whether the ISA levels the host lists (if any) are levels of its architecture."""
    levels_rule = get_kind(host.kind).toolchain.isa_variants
    attrs = dict(host.instance.attrs)
    if not (levels_rule and levels_rule.attr in host.written and attrs.get(levels_rule.attr)):
        return True
    known = levels_rule.known_of(arch)
    foreign = [level for level in attrs[levels_rule.attr] if level not in known]
    if not foreign:
        return True
    has = f"it has {', '.join(known)}" if known else "it has none (one compile)"
    ex.fail(host.site.at(levels_rule.attr),
            f"{levels_rule.attr}: {', '.join(foreign)} "
            f"{'is' if len(foreign) == 1 else 'are'} not a level of the host's {where}: {has}",
            f"list levels of {arch}, or unset {levels_rule.attr}; pin the instruction set "
            "with march (armv8.2-a+dotprod) or tune with mcpu (cortex-a76)")
    return False


def _device_follows_host(host: Member, device: Member) -> Member:
    """The device with the host's triple in its `host_triple_attr`, where the host builds
    for another architecture (the device's toolchain then builds host code for it)."""
    attr = get_kind(device.kind).host_triple_attr
    triple = rule_triple(get_kind(host.kind).toolchain.cross, dict(host.instance.attrs))
    if attr is None or triple is None or not is_foreign(triple):
        return device
    return Member(device.instance.with_attrs({attr: triple}), device.site, device.written)


def _cross_compiler(host: Member) -> Member:
    """`host` with its triple's compiler (aarch64-linux-gnu-gcc) where it names none, so
    the canonical target says which compiler every command runs."""
    rule = get_kind(host.kind).toolchain.cross
    triple = rule_triple(rule, dict(host.instance.attrs))
    if rule is None or triple is None or rule.compiler_attr in host.written:
        return host
    compiler = rule.compiler.format(triple=triple)
    return Member(host.instance.with_attrs({rule.compiler_attr: compiler}), host.site,
                  host.written)


def _inherit(kind: TargetKind, inst: TargetInstance, base: TargetInstance) -> TargetInstance:
    have, source = dict(inst.attrs), dict(base.attrs)
    changes: dict[str, object] = {}
    for rule in kind.inherit:
        value = source.get(rule.source)
        if have.get(rule.attribute) is not None or value is None:
            continue
        if rule.pattern is not None:
            match = re.search(rule.pattern, str(value))
            if match is None:
                continue
            value = match.group(1)
            if "integer" in kind.attribute_types(rule.attribute) and value.isdigit():
                value = int(value)
        changes[rule.attribute] = value
    return inst.with_attrs(changes)
