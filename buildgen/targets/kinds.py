"""Target kinds: one rules/<kind>.yaml plus one schemas/targets/<kind>.schema.json each.

A kind is declared once, declaratively; code asks a kind's properties (its device type,
whether it is an external codegen and for which kind), never its name. Loading checks
both files, so a plug-in's mistake is reported at its line, not as a crash later.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from buildgen.errors import BuildgenError, Diagnostic
from buildgen.schemacheck import accepts
from buildgen.targets.documents import load_checked_yaml, meta_schema
from buildgen.targets.patterns import CostSpec, PatternSpec, load_cost, load_patterns
from buildgen.targets.shared_kernels import SharedKernelsSpec, load_shared_kernels

RULES_FORMAT = 1
# The device type every host runs on. Non-external kinds of another device type are devices.
HOST_DEVICE = "cpu"
# What an attribute change re-runs, from the earliest action on: a value listed here also
# re-runs everything after it (partition -> codegen -> compile -> link). "none": how a tool
# runs (parallelism, scratch folders), never what it produces.
AFFECTS = ("partition", "codegen", "compile", "link", "none")


class Role(str, Enum):
    HOST = "host"  # a cpu kind that generates code itself (c)
    DEVICE = "device"  # a non-cpu kind that generates code itself (cuda)
    ACCELERATOR = "accelerator"  # an external codegen, for a host or device kind


@dataclass(frozen=True)
class Attribute:
    name: str
    default: Any
    description: str
    affects: str  # one of AFFECTS
    # Symbolic values a tuning record keys as the value they resolve to for a kernel
    # measured alone (schema `x-key-as`): a new symbolic default keeps existing records.
    key_as: tuple[tuple[Any, Any], ...] = ()

    def key_value(self, value: Any) -> Any:
        return dict(self.key_as).get(value, value) if isinstance(value, str) else value


@dataclass(frozen=True)
class Inherit:
    """An attribute that, unset, takes a value from the kind this one is external codegen for."""

    attribute: str
    source: str  # the attribute of the host or device it comes from
    pattern: str | None = None  # take this regex's first group of the source's value


@dataclass(frozen=True)
class IsaVariantsRule:
    """The module compiled once per instruction-set level, picked at create (rules'
    `isa_variants`): levels from attribute `attr`, else `defaults` by architecture."""

    attr: str
    flags: tuple[str, ...]  # templates over the attributes and {item}, the level
    # the attributes that, any of them set, pin one ISA (no variants); the first is the
    # one a pinned library reports (march)
    unless: tuple[str, ...] = ()
    defaults: tuple[tuple[str, tuple[str, ...]], ...] = ()  # machine -> levels
    known: tuple[tuple[str, tuple[str, ...]], ...] = ()  # machine -> every level it has
    level_flags: tuple[tuple[str, tuple[str, ...]], ...] = ()  # level -> flags, not `flags`

    def flags_of(self, level: str) -> tuple[str, ...]:
        return dict(self.level_flags).get(level, self.flags)

    def defaults_of(self, arch: str) -> tuple[str, ...]:
        return dict(self.defaults).get(arch, ())

    def known_of(self, arch: str) -> tuple[str, ...]:
        return dict(self.known).get(arch, ())


@dataclass(frozen=True)
class CrossRule:
    """Building for another machine (rules' `cross`): attribute `triple_attr` names its
    triple; with one, an unset `compiler_attr` becomes `compiler` (over {triple}), and a
    clang compiler gets `clang_flags` (gcc is built for one target)."""

    triple_attr: str
    compiler_attr: str
    compiler: str
    clang_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolchainRule:
    language: str  # "c", "cxx" or "cuda"
    compiler: str  # a template over the kind's attributes, e.g. "{cc}"
    flags: tuple[str, ...]
    optional_flags: tuple[tuple[str, tuple[str, ...]], ...]  # (attribute, templates) when set
    extra_flags_attr: str | None
    link_flags: tuple[str, ...]
    optional_link_flags: tuple[tuple[str, tuple[str, ...]], ...]
    extra_link_flags_attr: str | None
    pool: str | None = None
    pool_depth_attr: str | None = None  # the attribute giving the pool's depth
    # "module:function" filling unset attributes at gen time (a library found installed)
    discover: str | None = None
    # the attribute naming a program compiles run under (ccache), like CMake's
    # CMAKE_<LANG>_COMPILER_LAUNCHER
    launcher_attr: str | None = None
    isa_variants: IsaVariantsRule | None = None
    cross: CrossRule | None = None
    # The threading runtime the kind's library uses ("openmp"), and, for a host, the flags
    # and link flags it adds per runtime another member of its target uses.
    threads_with: str | None = None
    thread_runtimes: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class TargetKind:
    name: str
    device: str  # device type: "cpu", "cuda", ...
    is_external_codegen: bool
    external_codegen_for: str | None  # the host or device kind it generates code for
    backend: str | None  # "module:Class" implementing Backend; None: no code generator here
    toolchain: ToolchainRule
    inherit: tuple[Inherit, ...]
    schema: dict[str, Any]
    rules_file: Path
    schema_file: Path
    # What the partitioner matches (rules `patterns:`) and the analytic cost model (`cost:`).
    patterns: tuple[PatternSpec, ...] = ()
    cost: CostSpec = CostSpec()
    # Kernels one manifest-wide action compiles once for every model (rules `shared_kernels:`).
    shared_kernels: SharedKernelsSpec | None = None
    # "module:Class" measuring the kind's tuning records (rules `tuning: {tuner: ...}`); a kind
    # with one reads the model's records file at codegen.
    tuner: str | None = None
    # Why the kind builds only for the build machine's architecture (rules `native_only`),
    # or None: it follows the host's triple.
    native_only: str | None = None
    # A device's attribute that takes a foreign host triple (rules `host_triple_attr`).
    host_triple_attr: str | None = None
    # Whether its modules, in a library built with `profile`, time each kernel and export
    # M__<kind>_kernel_times (rules `kernel_times`; buildgen_abi.h).
    kernel_times: bool = False
    # Whether the memory its module plans depends on its options (rules `memory_options`):
    # report.json then reads its options file (and the records, if it reads them).
    memory_options: bool = False

    @property
    def reads_records(self) -> bool:
        return self.tuner is not None

    @property
    def role(self) -> Role:
        if self.is_external_codegen:
            return Role.ACCELERATOR
        return Role.HOST if self.device == HOST_DEVICE else Role.DEVICE

    @property
    def title(self) -> str:
        return str(self.schema.get("title", self.name))

    @property
    def attributes(self) -> tuple[Attribute, ...]:
        props = self.schema.get("properties", {})
        return tuple(
            Attribute(name, spec.get("default"), spec.get("description", ""), spec["x-affects"],
                      tuple(sorted(spec.get("x-key-as", {}).items())))
            for name, spec in sorted(props.items())
            if name != "kind"
        )

    def attribute(self, name: str) -> Attribute:
        for attr in self.attributes:
            if attr.name == name:
                return attr
        raise KeyError(f"kind {self.name!r} has no attribute {name!r}")

    def defaults(self) -> dict[str, Any]:
        return {a.name: a.default for a in self.attributes}

    def attribute_types(self, name: str) -> tuple[str, ...]:
        kind = self.schema["properties"][name].get("type", ())
        return (kind,) if isinstance(kind, str) else tuple(kind)


def _templates(value: str | list[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _optional(data: dict[str, Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple(sorted((attr, _templates(t)) for attr, t in data.items()))


def _toolchain(data: dict[str, Any]) -> ToolchainRule:
    return ToolchainRule(
        language=data["language"],
        compiler=data["compiler"],
        flags=tuple(data.get("flags", ())),
        optional_flags=_optional(data.get("optional_flags", {})),
        extra_flags_attr=data.get("extra_flags_attr"),
        link_flags=tuple(data.get("link_flags", ())),
        optional_link_flags=_optional(data.get("optional_link_flags", {})),
        extra_link_flags_attr=data.get("extra_link_flags_attr"),
        pool=data.get("pool"),
        pool_depth_attr=data.get("pool_depth_attr"),
        discover=data.get("discover"),
        launcher_attr=data.get("launcher_attr"),
        isa_variants=_isa_variants(data.get("isa_variants")),
        cross=_cross(data.get("cross")),
        threads_with=data.get("threads_with"),
        thread_runtimes=tuple(
            (name, _templates(spec["flags"]), _templates(spec.get("link_flags", ())))
            for name, spec in sorted(data.get("thread_runtimes", {}).items())),
    )


def _cross(data: dict[str, Any] | None) -> CrossRule | None:
    if data is None:
        return None
    return CrossRule(data["triple_attr"], data["compiler_attr"], data["compiler"],
                     _templates(data.get("clang_flags", ())))


def _isa_variants(data: dict[str, Any] | None) -> IsaVariantsRule | None:
    if data is None:
        return None
    def by_machine(key: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return tuple(sorted((m, tuple(levels)) for m, levels in data.get(key, {}).items()))

    unless = data.get("unless") or ()
    level_flags = tuple(sorted((level, _templates(flags))
                               for level, flags in data.get("level_flags", {}).items()))
    return IsaVariantsRule(data["attr"], _templates(data["flags"]),
                           (unless,) if isinstance(unless, str) else tuple(unless),
                           by_machine("defaults"), by_machine("known"), level_flags)


def _inherit(data: dict[str, Any]) -> tuple[Inherit, ...]:
    out = []
    for attr, source in sorted(data.items()):
        if isinstance(source, str):
            out.append(Inherit(attr, source))
        else:
            out.append(Inherit(attr, source["from"], source["pattern"]))
    return tuple(out)


def load_kind(
    rules_file: Path, schema_file: Path, data: dict[str, Any] | None = None,
    shipped: bool = False,
) -> TargetKind:
    """Read and check one kind; `data` is the rules file's content when already read.
    `shipped`: one of buildgen's own kinds, whose schema the tests check against the
    meta-schema (tests/targets/test_shipped_definitions.py) rather than every process."""
    if data is None:
        data = load_checked_yaml(rules_file, meta_schema("rules"))
    if not schema_file.is_file():
        raise BuildgenError(
            f"{rules_file}: kind {data['kind']!r} has no attribute schema at {schema_file}"
        )
    try:
        schema = json.loads(schema_file.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise BuildgenError(f"{schema_file}: invalid JSON: {exc}") from None
    kind = TargetKind(
        name=data["kind"],
        device=data["device"],
        is_external_codegen=data["is_external_codegen"],
        external_codegen_for=data.get("external_codegen_for"),
        backend=data.get("backend"),
        toolchain=_toolchain(data["toolchain"]),
        inherit=_inherit(data.get("inherit", {})),
        schema=schema,
        rules_file=rules_file,
        schema_file=schema_file,
        patterns=load_patterns(data["kind"], data.get("patterns", ()), rules_file),
        cost=load_cost(data.get("cost")),
        shared_kernels=load_shared_kernels(data.get("shared_kernels")),
        tuner=data.get("tuning", {}).get("tuner"),
        native_only=data.get("native_only"),
        host_triple_attr=data.get("host_triple_attr"),
        kernel_times=bool(data.get("kernel_times", False)),
        memory_options=bool(data.get("memory_options", False)),
    )
    problems = _kind_problems(kind, rules_file.stem, shipped)
    if problems:
        raise BuildgenError([Diagnostic(p) for p in problems])
    return kind


def _valid(schema: dict[str, Any], document: object) -> bool:
    if accepts(schema, document):
        return True
    import jsonschema

    return bool(jsonschema.Draft202012Validator(schema).is_valid(document))


def _key_as_problems(schema: dict[str, Any], name: str, spec: dict[str, Any],
                     where: str) -> list[str]:
    """`x-key-as` maps values of the attribute to other values of it."""
    key_as = spec.get("x-key-as", {})
    if not isinstance(key_as, dict):
        return [f"{where}: attribute {name!r}: x-key-as must map values to values"]
    return [
        f"{where}: attribute {name!r}: x-key-as {value!r}: {keyed!r} is not a value of it"
        for value, keyed in sorted(key_as.items())
        if not (_valid(schema, {name: value}) and _valid(schema, {name: keyed}))
    ]


def _kind_problems(kind: TargetKind, stem: str, shipped: bool = False) -> list[str]:
    """What the meta-schema cannot say: the two files agree, every attribute is documented."""
    where, schema_where = str(kind.rules_file), str(kind.schema_file)
    problems = []
    if stem != kind.name:
        problems.append(f"{where}: declares kind {kind.name!r}; name the file {kind.name}.yaml")
    if kind.is_external_codegen != (kind.external_codegen_for is not None):
        problems.append(
            f"{where}: 'external_codegen_for' names the kind an external codegen generates "
            "code for: give it exactly when is_external_codegen is true"
        )
    # A shipped kind's schema and defaults are checked by the tests
    # (tests/targets/test_shipped_definitions.py), not at every load: jsonschema alone
    # takes ~60 ms to import.
    if not shipped:
        import jsonschema

        try:
            jsonschema.Draft202012Validator.check_schema(kind.schema)
        except jsonschema.SchemaError as exc:
            return [*problems, f"{schema_where}: not a valid JSON Schema: {exc.message}"]
    if kind.schema.get("additionalProperties") is not False:
        problems.append(f"{schema_where}: set \"additionalProperties\": false, so typos are caught")
    props = kind.schema.get("properties", {})
    if props.get("kind") != {"const": kind.name}:
        problems.append(f"{schema_where}: properties.kind must be {{\"const\": \"{kind.name}\"}}")
    for name, spec in sorted(props.items()):
        if name == "kind":
            continue
        missing = [k for k in ("default", "description", "x-affects") if k not in spec]
        if missing:
            problems.append(f"{schema_where}: attribute {name!r} lacks {', '.join(missing)}")
            continue
        if spec["x-affects"] not in AFFECTS:
            problems.append(
                f"{schema_where}: attribute {name!r}: x-affects must be one of {', '.join(AFFECTS)}"
            )
        problems += _key_as_problems(kind.schema, name, spec, schema_where)
        if not shipped and not _valid(kind.schema, {name: spec["default"]}):
            problems.append(f"{schema_where}: attribute {name!r}: its default is not valid")
    for rule in kind.inherit:
        if rule.attribute not in props:
            problems.append(f"{where}: inherit: {rule.attribute!r} is not an attribute of the kind")
        elif props[rule.attribute].get("default") is not None:
            problems.append(
                f"{where}: inherit: {rule.attribute!r} must default to null (unset = inherited)"
            )
        if rule.pattern is not None and re.compile(rule.pattern).groups < 1:
            problems.append(f"{where}: inherit: {rule.attribute!r}: the pattern needs a group")
    tc = kind.toolchain
    named = [a for a, _ in (*tc.optional_flags, *tc.optional_link_flags)]
    by_name = (tc.extra_flags_attr, tc.extra_link_flags_attr, tc.pool_depth_attr, tc.launcher_attr,
               kind.host_triple_attr)
    named += [a for a in by_name if a]
    if tc.isa_variants:
        named += [tc.isa_variants.attr, *tc.isa_variants.unless]
        for machine, levels in tc.isa_variants.defaults:
            unknown = set(levels) - set(tc.isa_variants.known_of(machine))
            if unknown:
                problems.append(f"{where}: isa_variants: defaults of {machine} are not all "
                                f"known levels of it: {', '.join(sorted(unknown))}")
        level_templates = [t for _, ts in tc.isa_variants.level_flags for t in ts]
        named += [f for t in (*tc.isa_variants.flags, *level_templates)
                  for f in template_fields(t) if f != "item"]
    if tc.cross:
        named += [tc.cross.triple_attr, tc.cross.compiler_attr]
        named += [f for t in tc.cross.clang_flags for f in template_fields(t)]
        if set(template_fields(tc.cross.compiler)) - {"triple"}:
            problems.append(f"{where}: cross: compiler may use only {{triple}}")
    for template in (tc.compiler, *tc.flags, *tc.link_flags):
        named += template_fields(template)
    for _, templates in (*tc.optional_flags, *tc.optional_link_flags):
        named += [f for t in templates for f in template_fields(t) if f != "item"]
    for attr in dict.fromkeys(named):
        if attr not in props:
            problems.append(f"{where}: toolchain uses {attr!r}, which is not an attribute")
    return problems


def template_fields(template: str) -> tuple[str, ...]:
    """The attribute names a template uses: "-O{opt_level}" -> ("opt_level",)."""
    return tuple(field for _, field, _, _ in string.Formatter().parse(template) if field)
