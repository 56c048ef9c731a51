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
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from buildgen.manifest import ModelSpec
from buildgen.ninja import rules
from buildgen.ninja.context import GenContext
from buildgen.ninja.layout import SOURCE_EXTENSIONS, TargetFiles
from buildgen.ninja.plan import Action
from buildgen.targets import ResolvedTarget, Toolchain, get_kind
from buildgen.targets.shared_kernels import SharedKernelsSpec

SHARED_DIR = "_shared"


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

    @property
    def objects(self) -> tuple[str, ...]:
        return tuple(self.shard_object(i) for i in range(self.spec.shards))

    @property
    def archive(self) -> str:
        return f"{self.folder}/lib{self.kind}_kernels.a"

    @property
    def index(self) -> str:
        return f"{self.folder}/index.md"


def _folder(kind: str, toolchain: Toolchain) -> str:
    text = json.dumps([kind, toolchain.cc, list(toolchain.cflags)])
    return f"{SHARED_DIR}/{kind}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def add_shared_kernels(
    actions: Sequence[Action], models: Sequence[ModelSpec],
    targets: Mapping[str, ResolvedTarget], ctx: GenContext,
) -> list[Action]:
    """`actions` with each shared-kernels backend's codegen writing its list and its users'
    links taking the archive, plus the manifest-wide shard actions."""
    by_output = {a.outputs[0]: i for i, a in enumerate(actions)}
    out = list(actions)
    groups: dict[str, _Group] = {}
    for model in models:
        for target_name in model.targets:
            target, files = targets[target_name], TargetFiles(model.name, target_name)
            for kind in target.backends:
                spec = get_kind(kind).shared_kernels
                if spec is None:
                    continue
                toolchain = target.toolchain(kind)
                folder = _folder(kind, toolchain)
                group = groups.setdefault(folder, _Group(kind, spec, toolchain, folder))
                listing = kernels_list(files, kind)
                group.lists.append(listing)
                source = files.backend_source(kind, toolchain.language)
                i = by_output[source]
                out[i] = _codegen_writing_list(out[i], listing)
                i = by_output[files.shared_lib]
                out[i] = replace(out[i], inputs=(*out[i].inputs, group.archive))
                i = by_output[files.static_lib]
                out[i] = replace(out[i], inputs=(*out[i].inputs, *group.objects))
    for _, group in sorted(groups.items()):
        out += _group_actions(group, ctx)
    return out


def _codegen_writing_list(action: Action, listing: str) -> Action:
    args = action.variable("args")
    assert isinstance(args, tuple)
    extra = ("--kernels-out", listing)
    variables = tuple((k, (*args, *extra) if k == "args" else v) for k, v in action.variables)
    return replace(action, outputs=(*action.outputs, listing), variables=variables)


def _group_actions(group: _Group, ctx: GenContext) -> list[Action]:
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
            variables=(("cc", (*group.toolchain.launcher, group.toolchain.cc)),
                       ("cflags", group.toolchain.cflags), ("includes", includes)),
            pool=group.toolchain.pool,
        ))
    actions.append(Action(
        rule=rules.ARCHIVE.name, outputs=(group.archive,), inputs=group.objects,
        description=f"AR {group.archive}",
    ))
    return actions
