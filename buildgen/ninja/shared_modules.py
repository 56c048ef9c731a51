"""Kernels compiled once for a whole manifest: the plan of a kind's `shared_kernels:` block.

A kind that declares `shared_kernels: {render, shards}` in its rules (cutlass) splits its
code in two: each model's module (glue, cheap to compile) calls launchers that live in
kernel shards shared by every model built with the same toolchain. The plan:

    codegen <model>/<target>/src/<kind>.<ext>   also writes src/<kind>.kernels.json, the
                                                model's instantiations (2nd output)
    shared-kernels _shared/<kind>-<id>/         reads every model's list, writes shard_<i>
                                                sources (each instantiation in shard
                                                digest mod K; rewritten only when its bytes
                                                change, restat) and index.md (who uses what)
    K compiles (the kind's toolchain and pool)  shard_<i>.o
    ar _shared/<kind>-<id>/lib<kind>_kernels.a  every library using the kind links it (the
                                                linker takes the members it needs); each
                                                model's static library gets the shard objects

So a second model whose layers need kernels that exist already adds no shard change and
no compile. `<id>` digests the toolchain (compiler, flags): targets compiling differently
(another arch) get their own shards. Nothing here knows what a kernel is.

A kind whose kernels are fixed sources (`shared_kernels: {sources, module_flags}`: the c
host's bg_kernels.h entry points, in families) has no render: each source can be compiled
into _shared/<kind>-<id>/ once per ISA level, with the kind's toolchain plus
`module_flags`, which its modules' compiles take too. Which families a library needs
depends on the ops its module calls:

    codegen <model>/<target>/src/<kind>.<ext>  also writes src/<kind>.kernels.txt: the
                                               sources its libraries need (the families
                                               it calls and those they link)
    link_kernels  src/<kind>.link.dd           a ninja dyndep file adding their objects to
                                               the library's link and archive edges:
                                               ninja compiles only those
                  src/<kind>.link.rsp          the same objects, one a line, which the link
                                               and `ar` read (`@file`) and the action
                                               cache hashes

A model of MatMuls compiles no convolution. The `eager` sources (the GEMM, which nearly
every model calls) are order-only inputs of the links: compiled from the start of the
build, alongside the import, not after the codegen. The archive of every family stays in
the plan for builds without dyndep (the CMake fragment) and for `ninja <archive>`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from buildgen.manifest import ModelSpec
from buildgen.ninja import rules
from buildgen.ninja.context import GenContext
from buildgen.ninja.layout import (
    SOURCE_EXTENSIONS,
    TargetFiles,
    compile_units,
    shared_kernels_folder,
    unit_object,
    unit_toolchains,
)
from buildgen.ninja.plan import Action
from buildgen.targets import ResolvedTarget, Toolchain, get_kind
from buildgen.targets.shared_kernels import SharedKernelsSpec, fixed_sources, linked_toolchain


def kernels_list(files: TargetFiles, kind: str) -> str:
    """The instantiation list a model's codegen writes for a shared-kernels kind."""
    return f"{files.label}/src/{kind}.kernels.json"


@dataclass
class _Group:
    """One set of shards: a kind and the toolchain every one of its users compiles with."""

    kind: str
    spec: SharedKernelsSpec
    toolchain: Toolchain
    folder: str
    lists: list[str] = field(default_factory=list)

    def shard_source(self, index: int) -> str:
        ext = SOURCE_EXTENSIONS[self.toolchain.language]
        return f"{self.folder}/shard_{index}.{ext}"

    def shard_object(self, index: int) -> str:
        return f"{self.folder}/shard_{index}.o"

    # Read for every model and target that links the group, and the same each time: made
    # once (each call built every ISA level's toolchain; ~0.05 s of gen at 1,000 models).
    @cached_property
    def fixed_units(self) -> tuple[tuple[str, str, Toolchain], ...]:
        """(source, object, toolchain) of each fixed source at each ISA level."""
        return tuple((str(source), obj, toolchain)
                     for source in fixed_sources(self.spec)
                     for obj, toolchain in compile_units(
                         f"{self.folder}/{source.stem}.o", self.toolchain))

    @cached_property
    def objects(self) -> tuple[str, ...]:
        if self.spec.fixed:
            return tuple(obj for _, obj, _ in self.fixed_units)
        return tuple(self.shard_object(i) for i in range(self.spec.shards))

    @cached_property
    def eager_objects(self) -> tuple[str, ...]:
        """The objects of the fixed sources compiled before any module asks (`eager`)."""
        return tuple(obj for source, obj, _ in self.fixed_units
                     if Path(source).name in self.spec.eager)

    @property
    def archive(self) -> str:
        return f"{self.folder}/lib{self.kind}_kernels.a"

    @property
    def index(self) -> str:
        return f"{self.folder}/index.md"


def fixed_kernels(kind: str, toolchain: Toolchain) -> _Group | None:
    """The group of a kind whose shared kernels are fixed sources, with the toolchain its
    modules and kernels compile with (the stage API builds them outside ninja); None for
    other kinds."""
    spec = get_kind(kind).shared_kernels
    if spec is None or not spec.fixed:
        return None
    toolchain = linked_toolchain(toolchain, spec)
    return _Group(kind, spec, toolchain, _folder(kind, toolchain))


def _folder(kind: str, toolchain: Toolchain) -> str:
    text = json.dumps([kind, toolchain.cc, list(toolchain.cflags)])
    return shared_kernels_folder(kind, hashlib.sha256(text.encode()).hexdigest()[:8])


def add_shared_kernels(
    actions: Sequence[Action], models: Sequence[ModelSpec],
    targets: Mapping[str, ResolvedTarget], ctx: GenContext,
) -> list[Action]:
    """`actions` with each shared-kernels backend's codegen writing its list and its users'
    links taking the archive, plus the manifest-wide shard actions."""
    by_output = {a.outputs[0]: i for i, a in enumerate(actions)}
    out = list(actions)
    groups: dict[str, _Group] = {}
    kinds: dict[str, tuple[_KindUse, ...]] = {}  # by target: the same for all its models
    for model in models:
        for target_name in model.targets:
            files = TargetFiles(model.name, target_name)
            if target_name not in kinds:
                kinds[target_name] = _kind_uses(targets[target_name])
            for use in kinds[target_name]:
                kind, spec, toolchain = use.kind, use.spec, use.toolchain
                module = files.obj(kind)
                for level, cflags in use.unit_flags:  # the fixed kernels' link names
                    i = by_output[unit_object(module, level)]
                    out[i] = _with_variable(out[i], "cflags", cflags)
                group = groups.setdefault(use.folder, _Group(kind, spec, toolchain, use.folder))
                i = by_output[files.backend_source(kind, toolchain.language)]
                if spec.fixed:
                    # the kernels sources its module needs, for link_kernels
                    out[i] = _codegen_writing_list(out[i], files.kernels_sources(group.kind),
                                                   "--kernels-linked")
                    out.append(_link_kernels(group, files))
                    _link_by_dyndep(out, by_output, group, files)
                    continue
                listing = kernels_list(files, kind)
                group.lists.append(listing)
                out[i] = _codegen_writing_list(out[i], listing)
                i = by_output[files.shared_lib]
                out[i] = out[i].evolve(inputs=(*out[i].inputs, group.archive))
                i = by_output[files.static_lib]
                out[i] = out[i].evolve(inputs=(*out[i].inputs, *group.objects))
    for _, group in sorted(groups.items()):
        out += _group_actions(group, ctx)
    return out


@dataclass(frozen=True)
class _KindUse:
    """A target's backend with shared kernels: the toolchain its kernels build with, their
    folder, and (fixed kernels) the flags of each of the module's compiles."""

    kind: str
    spec: SharedKernelsSpec
    toolchain: Toolchain
    folder: str
    unit_flags: tuple[tuple[str | None, tuple[str, ...]], ...]


def _kind_uses(target: ResolvedTarget) -> tuple[_KindUse, ...]:
    uses = []
    for kind in target.backends:
        spec = get_kind(kind).shared_kernels
        if spec is None:
            continue
        toolchain = target.toolchain(kind)
        unit_flags: tuple[tuple[str | None, tuple[str, ...]], ...] = ()
        if spec.fixed:
            toolchain = linked_toolchain(toolchain, spec)
            unit_flags = tuple((level, unit.cflags)
                               for level, unit in unit_toolchains(toolchain))
        uses.append(_KindUse(kind, spec, toolchain, _folder(kind, toolchain), unit_flags))
    return tuple(uses)


def _codegen_writing_list(action: Action, listing: str, flag: str = "--kernels-out") -> Action:
    """The codegen action, also writing `listing` (named to it by `flag`)."""
    args = action.variable("args")
    assert isinstance(args, tuple)
    action = _with_variable(action, "args", (*args, flag, listing))
    return action.evolve(outputs=(*action.outputs, listing))


def kernels_objects_texts(target: ResolvedTarget) -> list[tuple[str, str]]:
    """(kind, text) of the target's file naming each fixed kernels source's objects (gen
    writes it once per target: TargetFiles.kernels_objects), for link_kernels."""
    texts = []
    for use in _kind_uses(target):
        if use.spec.fixed:
            group = _Group(use.kind, use.spec, use.toolchain, use.folder)
            texts.append((use.kind, "".join(f"{Path(source).name}={obj}\n"
                                            for source, obj, _ in group.fixed_units)))
    return texts


def _link_kernels(group: _Group, files: TargetFiles) -> Action:
    """The list -> the dyndep and response files of the target's libraries."""
    listing = files.kernels_sources(group.kind)
    dyndep, rsp = files.kernels_links(group.kind)
    objects = files.kernels_objects(group.kind)
    args = ["--sources", listing, "--objects", objects, "--dyndep", dyndep, "--rsp", rsp]
    for edge in (files.shared_lib, files.static_lib):
        args += ["--edge", edge]
    return Action(
        rule=rules.LINK_KERNELS.name, outputs=(dyndep, rsp), inputs=(listing, objects),
        description=f"KERNELS {files.label} {group.kind}", variables=(("args", tuple(args)),),
    )


def _link_by_dyndep(out: list[Action], by_output: Mapping[str, int], group: _Group,
                    files: TargetFiles) -> None:
    """The libraries take the kernels objects the codegen lists: ninja learns them from the
    dyndep file (and builds only those), the linker and ar read them from the list."""
    dyndep, rsp = files.kernels_links(group.kind)
    eager = group.eager_objects
    for library in (files.shared_lib, files.static_lib):
        i = by_output[library]
        if out[i].dyndep is not None:
            raise RuntimeError(f"{library}: two kinds with fixed shared kernels in one target")
        # The eager sources' objects are order-only: built from the start, linked (and then
        # inputs, through the dyndep file) only when the module calls them.
        out[i] = out[i].evolve(response_files=(*out[i].response_files, rsp), dyndep=dyndep,
                         dynamic_inputs=(*out[i].dynamic_inputs, *group.objects),
                         order_only=(*out[i].order_only, *eager))


def _with_variable(action: Action, name: str, value: tuple[str, ...]) -> Action:
    variables = tuple((k, value if k == name else v) for k, v in action.variables)
    return action.evolve(variables=variables)


def _group_actions(group: _Group, ctx: GenContext) -> list[Action]:
    if group.spec.fixed:
        return _fixed_group_actions(group, ctx)
    assert group.spec.render is not None
    sources = tuple(group.shard_source(i) for i in range(group.spec.shards))
    lists = tuple(sorted(set(group.lists)))
    args: list[str] = ["--kind", group.kind, "--render", group.spec.render,
                       "--out-dir", group.folder, "--shards", str(group.spec.shards),
                       "--ext", SOURCE_EXTENSIONS[group.toolchain.language],
                       "--index", group.index]
    for listing in lists:
        args += ["--list", listing]
    actions = [Action(
        rule=rules.SHARED_KERNELS.name,
        outputs=(*sources, group.index),
        inputs=lists,
        description=f"KERNELS {group.folder} ({len(lists)} lists)",
        variables=(("args", tuple(args)),),
    )]
    includes = ("-I" + ctx.path(ctx.include_dir),)
    for index, source in enumerate(sources):
        actions.append(Action(
            rule=rules.COMPILE.name,
            outputs=(group.shard_object(index),),
            inputs=(source,),
            description=f"NVCC {group.folder} shard_{index}.o"
            if group.toolchain.language == "cuda" else f"CC {group.folder} shard_{index}.o",
            variables=rules.compile_variables(group.toolchain, includes),
            pool=group.toolchain.pool,
        ))
    actions.append(_archive(group))
    return actions


def _fixed_group_actions(group: _Group, ctx: GenContext) -> list[Action]:
    # buildgen's own sources, named absolute even in a project inside buildgen's checkout:
    # the cache names them `<buildgen>/...` only so (a relative word on a command line stays
    # as written), and these objects then have one key in every project and installation,
    # the key the store filled at install time holds them under (buildgen/cache/prebuilt.py).
    includes = ("-I" + ctx.include_dir.as_posix(),)
    actions = [
        Action(
            rule=rules.COMPILE.name,
            outputs=(obj,),
            inputs=(Path(source).as_posix(),),
            description=f"CC {obj}",
            variables=rules.compile_variables(toolchain, includes),
            pool=toolchain.pool,
        )
        for source, obj, toolchain in group.fixed_units
    ]
    return [*actions, _archive(group)]


def _archive(group: _Group) -> Action:
    return Action(
        rule=rules.ARCHIVE.name, outputs=(group.archive,), inputs=group.objects,
        description=f"AR {group.archive}",
    )
