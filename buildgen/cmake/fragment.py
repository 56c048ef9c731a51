"""The BuildPlan as CMake sees it: custom commands, object groups and libraries.

The fragment is made from the very plan build.ninja is written from, action by action:

    gen              nothing: buildgen_add_models() runs `buildgen cmake` at configure time,
                     which writes the same option files, and CMAKE_CONFIGURE_DEPENDS re-runs
                     it when the manifest, rules or schemas change
    cc               a source of an OBJECT library that CMake compiles (so it is in
                     compile_commands.json); one object library per set of flags, so that
                     changing one backend's flags touches one library even under make. A
                     language the project has not enabled (and assembly, which CMake only
                     compiles once ASM is enabled) runs the plan's own compile command
    ar, link_shared  the STATIC and SHARED libraries CMake links; the link flags come from
                     the plan's link action
    shared kernels   an archive no model/target pair owns (shared_modules.py: a kind's kernels
                     compiled once for the whole manifest) is one STATIC library of its own,
                     with the commands writing its sources; each model's shared library links
                     it and each model's static library takes its objects, as in build.ninja
    anything else    one add_custom_command running the plan's command in the build dir

Each command goes to the CMake target of the model (import), of the model/target pair or of
the shared kernels that own its outputs; make needs that: a custom command listed by two
targets that build in parallel would run twice at once.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from buildgen.cmake.expand import action_values, expand_argv, expand_text
from buildgen.errors import BuildgenError, Diagnostic
from buildgen.manifest import ModelSpec
from buildgen.ninja import rules
from buildgen.ninja.context import GenContext
from buildgen.ninja.layout import ModelFiles, TargetFiles, shared_kernels_kind
from buildgen.ninja.plan import Action, BuildPlan, Pool
from buildgen.ninja.writer import Value
from buildgen.targets import get_kind

FRAGMENT_DIR = "cmake-fragment"  # in the build dir; not a C identifier, so never a model's
COMMAND_FILE_FORMAT = 1

# The CMake language compiling a generated source, by its extension (layout.py's names).
_LANGUAGES = {"c": "C", "cc": "CXX", "cu": "CUDA"}
# Link flags whose value is the next argument: CMake's link-item lists need them as one
# argument (`-L dir` -> `-Ldir`), else the value would be read as a library name.
_JOINED_LINK_FLAGS = ("-L", "-l")


@dataclass(frozen=True)
class Command:
    """One add_custom_command: a planned action, run in the build dir."""

    outputs: tuple[str, ...]
    depends: tuple[str, ...]
    argv: tuple[str, ...]
    comment: str
    depfile: str | None
    pool: str | None
    # A file whose bytes change exactly when argv does, listed in depends: make, unlike
    # ninja, does not re-run a command because its text changed.
    command_file: str


@dataclass(frozen=True)
class Compile:
    source: str
    command: Command  # the plan's own compile, used when CMake does not compile `source`


@dataclass(frozen=True)
class ObjectGroup:
    """Sources compiled with one set of flags: one CMake OBJECT library."""

    name: str  # the CMake target
    language: str | None  # C, CXX or CUDA; None: always the plan's own command
    flags: tuple[str, ...]
    includes: tuple[str, ...]  # folders
    pool: str | None
    compiles: tuple[Compile, ...]


@dataclass(frozen=True)
class ModelGroup:
    """What one model's targets share (its import): one custom target."""

    name: str  # the CMake custom target
    commands: tuple[Command, ...]


@dataclass(frozen=True)
class Library:
    """One model compiled for one target: a static and a shared library."""

    static: str  # CMake target names
    shared: str
    generate: str  # custom target driving the commands below
    after: str  # the model's group
    export_name: str  # buildgen::<export_name>, and <export_name>_shared
    output_name: str  # lib<output_name>.a / .so
    directory: str
    header: str
    include_dir: str
    link_items: tuple[str, ...]
    commands: tuple[Command, ...]
    groups: tuple[ObjectGroup, ...]
    kernels: tuple[str, ...]  # the SharedKernels (their `static`) this library links


@dataclass(frozen=True)
class SharedKernels:
    """Objects the plan compiles once for every library that uses them: one STATIC library."""

    static: str  # CMake target names
    generate: str  # custom target driving the commands below
    # The generate targets of the libraries using it: their codegen writes the lists that
    # its commands read (make only builds another target's outputs through a dependency).
    after: tuple[str, ...]
    output_name: str  # lib<output_name>.a
    directory: str
    commands: tuple[Command, ...]
    groups: tuple[ObjectGroup, ...]


@dataclass(frozen=True)
class Fragment:
    version: str
    configure_depends: tuple[str, ...]
    pools: tuple[Pool, ...]
    models: tuple[ModelGroup, ...]
    libraries: tuple[Library, ...]
    kernels: tuple[SharedKernels, ...] = ()

    def command_files(self) -> dict[str, str]:
        """Path (relative to the build dir) -> text of every command file."""
        commands = [c for m in self.models for c in m.commands]
        owners: list[SharedKernels | Library] = [*self.kernels, *self.libraries]
        for lib in owners:
            commands += lib.commands
            commands += [c.command for g in lib.groups for c in g.compiles]
        return {c.command_file: _command_file_text(c) for c in commands}

    def target_names(self) -> tuple[str, ...]:
        names = [m.name for m in self.models]
        for kernels in self.kernels:
            names += [kernels.static, kernels.generate, *(g.name for g in kernels.groups)]
        for lib in self.libraries:
            names += [lib.static, lib.shared, lib.generate, *(g.name for g in lib.groups)]
        return tuple(names)


def fragment_from_plan(
    plan: BuildPlan, models: Sequence[ModelSpec], ctx: GenContext
) -> Fragment:
    owners = _Owners(models)
    # Archives that no model/target pair owns are manifest-wide: their folders own the
    # commands writing their sources.
    shared = {a.outputs[0]: a for a in plan.actions
              if a.rule == rules.ARCHIVE.name and owners.owner(a.outputs[0]) is None}
    for archive in sorted(shared):
        owners.add(archive.rsplit("/", 1)[0] + "/", archive)
    by_owner: dict[str, list[Command]] = {}
    for action in plan.actions:
        if action.rule in (rules.GEN.name, rules.COMPILE.name, rules.ARCHIVE.name,
                           rules.LINK_SHARED.name):
            continue
        by_owner.setdefault(owners.of(action), []).append(_command(plan, action))
    groups = [
        ModelGroup(f"buildgen_{m.name}_import", tuple(by_owner.get(m.name, ())))
        for m in models
    ]
    kernel_names = {archive: _kernels_name(archive, models) for archive in shared}
    libraries = [
        _library(plan, TargetFiles(m.name, t), by_owner.get(TargetFiles(m.name, t).label, []),
                 kernel_names)
        for m in models
        for t in m.targets
    ]
    kernels = [
        _shared_kernels(plan, shared[archive], tuple(by_owner.get(archive, ())), tuple(
            lib.generate for lib in libraries if kernel_names[archive] in lib.kernels),
            kernel_names[archive])
        for archive in sorted(shared)
    ]
    fragment = Fragment(
        version=ctx.version,
        configure_depends=tuple(ctx.path(p) for p in (ctx.manifest, *ctx.generator_inputs)),
        pools=plan.pools,
        models=tuple(groups),
        libraries=tuple(libraries),
        kernels=tuple(kernels),
    )
    _check_unique(fragment.target_names())
    return fragment


class _Owners:
    """Which model, model/target pair or shared archive owns a planned action, from where
    it writes."""

    def __init__(self, models: Sequence[ModelSpec]):
        self.pairs: list[tuple[str, str]] = []
        for model in models:
            for target in model.targets:
                files = TargetFiles(model.name, target)
                self.pairs.append((files.label + "/", files.label))
        self.others: list[tuple[str, str]] = []
        for model in models:
            graph = ModelFiles(model.name).graph
            self.others.append((graph.rsplit("/", 1)[0] + "/", model.name))

    def add(self, prefix: str, owner: str) -> None:
        """Outputs under `prefix` belong to `owner` (before any model's folder)."""
        self.others.insert(0, (prefix, owner))

    def of(self, action: Action) -> str:
        owners = {self.owner(path) for path in (*action.outputs, *action.implicit_outputs)}
        owner = owners.pop() if len(owners) == 1 else None
        if owner is None:
            raise RuntimeError(f"cannot place action {action.description!r} in one CMake target")
        return owner

    def owner(self, path: str) -> str | None:
        # Model/target pairs first: their folders are inside their model's.
        for prefix, owner in (*self.pairs, *self.others):
            if path.startswith(prefix):
                return owner
        return None


def _command(plan: BuildPlan, action: Action) -> Command:
    rule = plan.rule(action.rule)
    values = action_values(plan, action)
    outputs = (*action.outputs, *action.implicit_outputs)
    return Command(
        outputs=outputs,
        # CMake has no order-only dependency for a custom command: an order-only input (a
        # generated header) becomes a real one, which at worst re-runs the command when
        # that header changes.
        depends=(*action.inputs, *action.implicit, *action.order_only),
        argv=expand_argv(rule.command, values),
        comment=action.description,
        depfile=expand_text(rule.depfile, values) if rule.depfile else None,
        pool=action.pool,
        command_file=f"{FRAGMENT_DIR}/commands/{outputs[0]}.cmd",
    )


def _kernels_name(archive: str, models: Sequence[ModelSpec]) -> str:
    """_shared/cutlass-1a2b3c4d/libcutlass_kernels.a -> buildgen_shared_cutlass_1a2b3c4d.

    A kind's fixed kernels (the c host's) are the same for every manifest, so two
    buildgen_add_models() calls may both need them: each call's copy is named after its
    models too (two calls whose models' names collide fail on those first). Rendered
    kernels (cutlass's) hold a manifest's instantiations: two calls sharing them are told
    to use one manifest."""
    folder = archive.rsplit("/", 2)[-2]
    name = "buildgen_shared_" + "".join(c if c.isalnum() else "_" for c in folder)
    spec = get_kind(shared_kernels_kind(archive)).shared_kernels
    if spec is not None and spec.fixed:
        names = "\n".join(sorted(m.name for m in models))
        name += "_" + hashlib.sha256(names.encode()).hexdigest()[:8]
    return name


def _shared_kernels(plan: BuildPlan, archive: Action, commands: tuple[Command, ...],
                    after: tuple[str, ...], base: str) -> SharedKernels:
    path = archive.outputs[0]
    directory, file = path.rsplit("/", 1)
    return SharedKernels(
        static=base,
        generate=f"{base}_generate",
        after=after,
        output_name=file.removeprefix("lib").removesuffix(".a"),
        directory=directory,
        commands=commands,
        groups=_object_groups(plan, archive.inputs, base),
    )


def _library(plan: BuildPlan, files: TargetFiles, commands: list[Command],
             kernel_names: dict[str, str]) -> Library:
    link = plan.action_for(files.shared_lib)
    base = f"buildgen_{files.model}_{files.target}"
    # The model's static library also takes the shared objects (its archive action lists
    # them), so it is complete on its own; CMake adds them from the shared library's target.
    objects = [path for path in link.inputs if path not in kernel_names]
    return Library(
        static=base,
        shared=f"{base}_shared",
        generate=f"{base}_generate",
        after=f"buildgen_{files.model}_import",
        export_name=f"{files.model}_{files.target}",
        output_name=files.model,
        directory=files.label,
        header=files.header,
        include_dir=files.include_dir,
        link_items=link_items(_tuple(link.variables, "ldflags")),
        commands=tuple(commands),
        groups=_object_groups(plan, objects, base),
        kernels=_kernels_linked(plan, link, kernel_names),
    )


def _kernels_linked(plan: BuildPlan, link: Action, kernel_names: dict[str, str]
                    ) -> tuple[str, ...]:
    """The shared kernels libraries a link takes: archives it names, and the archives of
    the objects a dyndep file may add (the c host's families) whole: CMake compiles every
    family once, and the linker takes the archive members it needs."""
    archive_of = {obj: archive for archive in kernel_names
                  for obj in plan.action_for(archive).inputs}
    named = [path for path in link.inputs if path in kernel_names]
    named += [archive_of[path] for path in link.dynamic_inputs if path in archive_of]
    return tuple(kernel_names[archive] for archive in dict.fromkeys(named))


@dataclass(frozen=True)
class _CompileSettings:
    """What sources must share to be compiled by one object library."""

    language: str | None
    flags: tuple[str, ...]
    includes: tuple[str, ...]
    pool: str | None


def _object_groups(plan: BuildPlan, objects: Sequence[str], base: str) -> tuple[ObjectGroup, ...]:
    """Compiles of `objects`, grouped by language and flags, in link order."""
    grouped: dict[_CompileSettings, list[Compile]] = {}
    for obj in objects:
        action = plan.action_for(obj)
        if action.rule != rules.COMPILE.name:
            raise RuntimeError(f"{obj} is linked but not compiled")
        source = action.inputs[0]
        settings = _CompileSettings(
            language=_language(source),
            flags=_tuple(action.variables, "cflags"),
            includes=tuple(_include_dir(f) for f in _tuple(action.variables, "includes")),
            pool=action.pool,
        )
        grouped.setdefault(settings, []).append(Compile(source, _command(plan, action)))
    groups = []
    for settings, compiles in grouped.items():
        # Named after its first object: c.o -> buildgen_mlp_cpu_c_objects.
        stem = compiles[0].command.outputs[0].rsplit("/", 1)[-1].removesuffix(".o")
        groups.append(ObjectGroup(
            name=f"{base}_{stem}_objects",
            language=settings.language,
            flags=settings.flags,
            includes=settings.includes,
            pool=settings.pool,
            compiles=tuple(compiles),
        ))
    return tuple(groups)


def _language(source: str) -> str | None:
    return _LANGUAGES.get(source.rsplit(".", 1)[-1]) if "." in source else None


def _include_dir(flag: str) -> str:
    if not flag.startswith("-I") or flag == "-I":
        raise RuntimeError(f"include flag {flag!r} is not -I<dir>")
    return flag[2:]


def _tuple(variables: tuple[tuple[str, Value], ...], key: str) -> tuple[str, ...]:
    for name, value in variables:
        if name == key:
            if not isinstance(value, tuple):
                raise RuntimeError(f"${key} is not an argument list")
            return value
    return ()


def link_items(ldflags: Sequence[str]) -> tuple[str, ...]:
    """Link flags as CMake link items (target_link_libraries keeps their order and puts
    them after the objects, where `-l` must be): `-L dir` and `-l name` become one item."""
    items: list[str] = []
    pending: str | None = None
    for flag in ldflags:
        if pending is not None:
            items.append(pending + flag)
            pending = None
        elif flag in _JOINED_LINK_FLAGS:
            pending = flag
        elif flag in ("-Xlinker", "-z", "-u", "-T", "-framework"):
            raise BuildgenError(Diagnostic(
                f"link flag {flag!r} takes the next argument as its value, which CMake's "
                "link items cannot express",
                hint=f"write it as one argument, e.g. -Wl,{flag.lstrip('-')},<value>"
                if flag != "-Xlinker" else "write it as one argument: -Wl,<value>",
            ))
        else:
            items.append(flag)
    if pending is not None:
        raise BuildgenError(f"link flag {pending!r} has no value after it")
    return tuple(items)


def _check_unique(names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise BuildgenError(Diagnostic(
                f"two models or targets both make the CMake target {name!r} (CMake names are "
                "buildgen_<model>_<target>, so 'a_b' + 'c' and 'a' + 'b_c' collide)",
                hint="rename one of the models or targets",
            ))
        seen.add(name)


def _command_file_text(command: Command) -> str:
    lines = [f"# buildgen command file format {COMMAND_FILE_FORMAT}", shlex.join(command.argv)]
    if command.depfile:
        lines.append(f"depfile {command.depfile}")
    return "\n".join(lines) + "\n"
