"""Plan the build: the manifest's models and resolved targets -> a BuildPlan.

Every decision is made here, at gen time: which backends a target has (so the graph is
static: one codegen action per backend, even one that ends up with no regions), which
compiler and flags each source gets, which files each stage reads. Actions only execute.
Anything that changes an output is an input or on the command line: input shapes and pins
on the import/partition command, flags on the compile command, buildgen's version on every
stage command.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from buildgen.codegen.isa import isa_arguments, isa_plan
from buildgen.errors import BuildgenError
from buildgen.manifest import ModelSpec
from buildgen.ninja import rules
from buildgen.ninja.cache_plan import with_cache
from buildgen.ninja.context import GenContext
from buildgen.ninja.layout import (
    BUILD_NINJA,
    SOURCE_EXTENSIONS,
    ModelFiles,
    TargetFiles,
    unit_object,
    unit_toolchains,
)
from buildgen.ninja.plan import Action, BuildPlan, Phony, Pool
from buildgen.ninja.shared_modules import add_shared_kernels
from buildgen.targets import ResolvedTarget, Toolchain, get_kind
from buildgen.targets.model import memoized_toolchains

ALL = "all"
# What the user-facing description says for a compile, by source language.
_COMPILE_VERB = {"c": "CC", "cxx": "CXX", "cuda": "NVCC"}


def plan_build(
    models: Sequence[ModelSpec],
    targets: Mapping[str, ResolvedTarget],
    ctx: GenContext,
    gen_outputs: Sequence[str],
    cached: bool = False,
) -> BuildPlan:
    """`targets` holds every target a model names; `gen_outputs` are the files gen writes
    besides build.ninja (target.json, options/*.json), declared so ninja knows their maker.
    `cached` runs every action but gen through the action cache (ninja/cache_plan.py); the
    CMake fragment, whose commands CMake runs, plans without it."""
    with memoized_toolchains():  # one gen: nothing a toolchain depends on changes
        return _plan_build(models, targets, ctx, gen_outputs, cached)


def _plan_build(
    models: Sequence[ModelSpec],
    targets: Mapping[str, ResolvedTarget],
    ctx: GenContext,
    gen_outputs: Sequence[str],
    cached: bool,
) -> BuildPlan:
    actions: list[Action] = [_gen_action(ctx, gen_outputs)]
    phonies: list[Phony] = []
    shapes = {name: _TargetShape.of(targets[name])
              for name in sorted({t for model in models for t in model.targets})}
    for model in models:
        if model.name == ALL:
            raise BuildgenError(f"model name {ALL!r} clashes with the build's default target")
        actions.append(_import_action(model, ctx))
        for target_name in model.targets:
            files = TargetFiles(model.name, target_name)
            actions += _target_actions(model, targets[target_name], shapes[target_name], files,
                                       ctx)
            phonies.append(Phony(files.phony, _products(files)))
        target_phonies = tuple(TargetFiles(model.name, t).phony for t in model.targets)
        phonies.append(Phony(model.name, target_phonies))
    phonies.append(Phony(ALL, tuple(m.name for m in models)))
    # Kernels shared by every model (a kind's rules `shared_kernels:`): manifest-wide actions.
    actions = add_shared_kernels(actions, models, targets, ctx)
    # ninja's built-in `console` pool must not be redeclared.
    pools = sorted({a.pool for a in actions if a.pool and a.pool != "console"})
    stages = (*_stage_start(ctx, cached), "--buildgen-version", ctx.version)
    plan = BuildPlan(
        variables=((rules.PYTHON, ctx.python), (rules.STAGES, stages)),
        pools=tuple(Pool(name, ctx.pool_depth(name)) for name in pools),
        rules=rules.ALL_RULES,
        actions=tuple(actions),
        phonies=tuple(phonies),
        defaults=(ALL,),
    )
    return with_cache(plan, ctx) if cached else plan


def _stage_start(ctx: GenContext, cached: bool) -> tuple[str, ...]:
    """How a stage starts. Through the cache, a stage is the wrapper's command: plain, as
    its key must not name the worker. Without it, through the worker when there is one."""
    if ctx.worker and not cached:
        return ctx.through_worker("stage")
    return (*ctx.python, "-m", "buildgen.stages")


def _products(files: TargetFiles) -> tuple[str, ...]:
    return (files.shared_lib, files.static_lib, files.header, files.report_json, files.report_md)


def _gen_action(ctx: GenContext, gen_outputs: Sequence[str]) -> Action:
    return Action(
        rule=rules.GEN.name,
        outputs=(BUILD_NINJA,),
        implicit_outputs=tuple(sorted(gen_outputs)),
        inputs=(ctx.path(ctx.manifest),),
        implicit=tuple(ctx.path(p) for p in ctx.generator_inputs),
        description=f"GEN {BUILD_NINJA}",
        # ninja runs gen in the build dir, so the build dir is "." on this command line.
        variables=(("args", ("--manifest", ctx.path(ctx.manifest), "--build-dir", ".")),),
    )


def _import_action(model: ModelSpec, ctx: GenContext) -> Action:
    files = ModelFiles(model.name)
    source = ctx.path(model.source)
    args = ["--model", model.name, "--source", source]
    for name, shape in model.inputs:
        args += ["--input", f"{name}={','.join(str(d) for d in shape)}"]
    args += ["--graph", files.graph, "--weights", files.weights, "--constants", files.constants,
             "--depfile", files.import_depfile]
    return Action(
        rule=rules.IMPORT.name,
        outputs=(files.graph, files.weights, files.constants),
        inputs=(source,),
        description=f"IMPORT {model.name}",
        variables=(("args", tuple(args)), ("dep", files.import_depfile)),
    )


@dataclass(frozen=True)
class _TargetShape:
    """What the actions of every model built for one target share, worked out once per
    target rather than once per model (a large manifest names few targets)."""

    host: Toolchain
    weights: Toolchain  # the host's, with only the flags an object of data needs
    # (backend, its toolchain, its compiles: (ISA level or None, toolchain) per object)
    backends: tuple[tuple[str, Toolchain, tuple[tuple[str | None, Toolchain], ...]], ...]
    device_includes: tuple[str, ...]
    isa_args: tuple[str, ...]
    rules_digest: str
    ldflags: tuple[str, ...]

    @staticmethod
    def of(target: ResolvedTarget) -> _TargetShape:
        from buildgen.partition.tables import tables_digest

        host = target.toolchain(target.host_kind)
        backends = []
        for backend in target.backends:
            toolchain = target.toolchain(backend)
            if toolchain.language not in SOURCE_EXTENSIONS:
                raise BuildgenError(
                    f"backend {backend!r} declares language {toolchain.language!r}; buildgen "
                    f"compiles {', '.join(sorted(SOURCE_EXTENSIONS))}"
                )
            backends.append((backend, toolchain, unit_toolchains(toolchain)))
        # The launcher (ccache) never runs weights.S's compile: see _compile.
        weights = dataclasses.replace(host, cflags=_data_flags(host.cflags), launcher=())
        return _TargetShape(
            host, weights, tuple(backends), _device_includes(target),
            isa_arguments(isa_plan(target)), tables_digest(target.backends),
            _link_flags(target),
        )


def _target_actions(
    model: ModelSpec, target: ResolvedTarget, shape: _TargetShape, files: TargetFiles,
    ctx: GenContext,
) -> list[Action]:
    graph = ModelFiles(model.name)
    actions = [_partition_action(model, shape, files, graph, ctx)]
    objects: list[str] = []
    includes = ("-I" + ctx.path(ctx.include_dir), "-I" + files.include_dir)
    for backend, toolchain, units in shape.backends:
        source = files.backend_source(backend, toolchain.language)
        actions.append(_codegen_action(model, backend, source, files, graph, ctx))
        module = files.obj(backend)
        for level, unit_toolchain in units:
            obj = unit_object(module, level)
            objects.append(obj)
            actions.append(_compile(source, obj, unit_toolchain, includes, files))
    actions.append(
        Action(
            rule=rules.EXECUTOR.name,
            outputs=(files.executor_source, files.header, files.weights_asm),
            inputs=(graph.graph, files.partition),
            description=f"EXECUTOR {files.label}",
            variables=(("args", (
                "--model", model.name, "--graph", graph.graph, "--partition", files.partition,
                "--weights-path", graph.weights, "--source", files.executor_source,
                "--header", files.header, "--asm", files.weights_asm, *shape.isa_args,
                *(("--profile",) if target.profiled else ()),
            )),),
        )
    )
    objects.append(files.obj("model"))
    # model.c calls the device's runtime (its C API) when a region runs there.
    executor_includes = (*includes, *shape.device_includes)
    actions.append(
        _compile(files.executor_source, files.obj("model"), shape.host, executor_includes, files)
    )
    objects.append(files.obj("weights"))
    # .incbin is invisible to the compiler's depfile, so weights.bin is declared here.
    actions.append(_compile(files.weights_asm, files.obj("weights"), shape.weights, includes,
                            files, (graph.weights,)))
    actions += _link_actions(shape, objects, files)
    # The report describes what runs where and the memory it takes, which no compile flag
    # changes: like the partition it reads the code-affecting view of the target, plus the
    # options and records of the kinds whose memory plan depends on them (rules
    # `memory_options`), so the arena it reports is the one codegen plans.
    planned = [kind for kind in target.backends if get_kind(kind).memory_options]
    records = _codegen_records(model, planned, ctx)
    options = tuple(files.options(kind) for kind in planned)
    actions.append(
        Action(
            rule=rules.REPORT.name,
            outputs=(files.report_json, files.report_md),
            inputs=(files.codegen_target_file, graph.graph, graph.constants, files.partition,
                    *options, *records),
            description=f"REPORT {files.label}",
            variables=(("args", (
                "--model", model.name, "--target", files.codegen_target_file,
                "--graph", graph.graph, "--constants", graph.constants,
                "--weights", graph.weights, "--partition", files.partition,
                "--json", files.report_json, "--md", files.report_md,
                "--depfile", f"{files.report_json}.d", *shape.isa_args,
                *(word for path in options for word in ("--options", path)),
                *(("--records", *records) if records else ()),
            )), ("dep", f"{files.report_json}.d")),
        )
    )
    return actions


def _codegen_records(model: ModelSpec, kinds: Sequence[str], ctx: GenContext) -> tuple[str, ...]:
    """The records file on the command line of a codegen (or report) action whose kinds read
    it: tuning records choose kernels per shape or a module's layout (`buildgen tune`
    writes them), so they are an input whatever the partition policy. Its path, or ()."""
    if model.partition.records is None or not any(get_kind(k).reads_records for k in kinds):
        return ()
    return (ctx.path(model.partition.records),)


def _codegen_action(model: ModelSpec, backend: str, source: str, files: TargetFiles,
                    graph: ModelFiles, ctx: GenContext) -> Action:
    # constants.bin: constant values (Slice starts, Reshape shapes) shape the code; a large
    # weight, if one is read, reaches the depfile.
    inputs: tuple[str, ...] = (graph.graph, graph.constants, files.partition,
                               files.options(backend))
    records = _codegen_records(model, (backend,), ctx)
    args: tuple[str, ...] = (
        "--model", model.name, "--backend", backend, "--graph", graph.graph,
        "--constants", graph.constants, "--weights", graph.weights,
        "--partition", files.partition, "--options", files.options(backend), "--out", source,
        "--depfile", f"{source}.d", *(("--records", *records) if records else ()),
    )
    return Action(
        rule=rules.CODEGEN.name,
        outputs=(source,),
        inputs=(*inputs, *records),
        description=f"CODEGEN {backend} {files.label}",
        variables=(("args", args), ("dep", f"{source}.d")),
    )


def _partition_action(
    model: ModelSpec, shape: _TargetShape, files: TargetFiles, graph: ModelFiles,
    ctx: GenContext,
) -> Action:
    options = model.partition
    # The priority policy reads the target restricted to partition-affecting attributes, so
    # a compile flag re-runs no partition. The cost policy reads all of it: every option
    # that changes a kernel's speed is part of a tuning record's key.
    target_file = files.target_file if options.policy == "cost" else files.codegen_target_file
    depfile = f"{files.partition}.d"
    # constants.bin: a backend may decline a node for its constant inputs (Resize scales);
    # the stage's depfile names it when one did. The import writes it with graph.json.
    args = ["--model", model.name, "--target", target_file, "--graph", graph.graph,
            "--constants", graph.constants]
    for pattern, backend in model.pins:
        args += ["--pin", f"{pattern}={backend}"]
    inputs = [graph.graph, target_file]
    args += ["--policy", options.policy]
    # The pattern tables and cost models of the target's kinds live in rules files: their
    # digest on the command line re-runs the partition when one changes.
    args += ["--rules-digest", shape.rules_digest]
    if options.records is not None and options.policy == "cost":
        args += ["--records", ctx.path(options.records)]
        inputs.append(ctx.path(options.records))
    if options.file is not None:
        args += ["--partition-file", ctx.path(options.file)]
        inputs.append(ctx.path(options.file))
    if options.step is not None:
        # The step's module is found from the manifest's folder; the stage lists the file
        # it imported in its depfile.
        args += ["--step", options.step, "--step-path", ctx.path(ctx.root)]
    args += ["--depfile", depfile, "--out", files.partition]
    return Action(
        rule=rules.PARTITION.name,
        outputs=(files.partition,),
        inputs=tuple(inputs),
        description=f"PARTITION {files.label}",
        variables=(("args", tuple(args)), ("dep", depfile)),
    )


# Flags that cannot change an object assembled from data (weights.S: .incbin and symbols):
# optimisation, warnings, the C standard, debug info, threads, code-generation switches.
# Left on the command line, changing `opt_level` would re-assemble every model's weights.
_CODE_ONLY_FLAGS = re.compile(r"-(O.*|W.*|std=.*|g.*|pthread|f(?!(no-)?(pic|PIC|pie|PIE)$).*)")


def _data_flags(cflags: tuple[str, ...]) -> tuple[str, ...]:
    """The host's flags that still matter for weights.S: ABI and position independence
    (-fPIC, -m64, --target, -mfloat-abi, ...), ISA selection, defines."""
    return tuple(flag for flag in cflags if not _CODE_ONLY_FLAGS.fullmatch(flag))


def _compile(
    source: str,
    obj: str,
    toolchain: Toolchain,
    includes: tuple[str, ...],
    files: TargetFiles,
    implicit: tuple[str, ...] = (),
) -> Action:
    name = obj.rsplit("/", 1)[-1]
    # The launcher (ccache) runs the compiler, never the link. A compile that reads files
    # its preprocessor does not see (`implicit`: weights.S's .incbin) runs without it: a
    # launcher keys its cache on the preprocessed source and would miss those files.
    if implicit and toolchain.launcher:
        toolchain = dataclasses.replace(toolchain, launcher=())
    return Action(
        rule=rules.COMPILE.name,
        outputs=(obj,),
        inputs=(source,),
        implicit=implicit,
        # The header is generated: it must exist before the first compile's depfile can
        # mention it; afterwards the depfile tracks it.
        order_only=(files.header,),
        description=f"{_COMPILE_VERB.get(toolchain.language, 'CC')} {files.label} {name}",
        variables=rules.compile_variables(toolchain, includes),
        pool=toolchain.pool,
    )


def _link_flags(target: ResolvedTarget) -> tuple[str, ...]:
    # Accelerators' libraries first, then the host's. Flags are kept as whole per-backend
    # groups (a flag may take the next one as its value); only a repeated group is dropped.
    groups: list[tuple[str, ...]] = []
    for backend in target.backends:
        group = target.toolchain(backend).ldflags
        if group not in groups:
            groups.append(group)
    return tuple(flag for group in groups for flag in group)


def _link_actions(shape: _TargetShape, objects: list[str], files: TargetFiles) -> list[Action]:
    lib = files.shared_lib.rsplit("/", 1)[-1]
    archive = files.static_lib.rsplit("/", 1)[-1]
    return [
        Action(
            rule=rules.LINK_SHARED.name,
            outputs=(files.shared_lib,),
            inputs=tuple(objects),
            description=f"LINK {files.label} {lib}",
            variables=(("ld", (shape.host.cc,)), ("ldflags", shape.ldflags)),
        ),
        Action(
            rule=rules.ARCHIVE.name,
            outputs=(files.static_lib,),
            inputs=tuple(objects),
            description=f"AR {files.label} {archive}",
        ),
    ]


def _device_includes(target: ResolvedTarget) -> tuple[str, ...]:
    """The device toolchain's -I flags (its runtime's headers), for the host's compile of the
    executor; () without a device."""
    if target.device is None:
        return ()
    flags = target.toolchain(target.device.kind).cflags
    return tuple(f for f in flags if f.startswith("-I") and len(f) > 2)
