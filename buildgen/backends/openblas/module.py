"""Render an openblas module: one C translation unit with every openblas region of a model.

Layout: a header comment (model, source, library, threads, regions, scratch), the includes,
per kernel its constants and its static function (the ONNX nodes it implements above it),
then per region the exported function binding tensors to named pointers and calling the
kernels in order, and finally M__openblas_scratch_bytes, _create and _destroy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath

import numpy as np

from buildgen import __version__
from buildgen.backends.c.cwriter import Code, Names, comment, shape_text
from buildgen.backends.cpu_common.groups import group_region
from buildgen.backends.cpu_common.plan import Workspace, plan_groups
from buildgen.backends.openblas.kernels import BlasKernel, lower_group, node_line
from buildgen.backends.openblas.support import RULES
from buildgen.codegen.memplan import MemoryPlan
from buildgen.ir import Graph
from buildgen.partition.boundaries import RegionIO, region_io
from buildgen.partition.model import Region

_RESERVED = ("env", "in", "out", "scratch", "use_threads", "NULL", "int64_t", "size_t")


@dataclass(frozen=True)
class Library:
    """Which OpenBLAS the module calls: symbol prefix and what to say about it."""

    prefix: str  # "scipy_" for scipy-openblas32, "" for a plain OpenBLAS
    description: str
    threads: int  # 0 = leave OpenBLAS's own setting


@dataclass(frozen=True)
class LoweredRegion:
    region: Region
    io: RegionIO
    kernels: tuple[BlasKernel, ...]
    plan: MemoryPlan


def lower_region(
    graph: Graph, region: Region, first_kernel: int, library: Library,
    weights: Mapping[str, np.ndarray] | None,
) -> LoweredRegion:
    io = region_io(graph, region)
    groups = group_region(graph, region.nodes, RULES)
    kernels = tuple(
        lower_group(g, first_kernel + i, graph, library.prefix, weights)
        for i, g in enumerate(groups)
    )
    workspaces = [Workspace(f"{k.name}_col", i, k.workspace)
                  for i, k in enumerate(kernels) if k.workspace]
    plan = plan_groups(graph, groups, io, lambda t: graph.type_of(t).nbytes, workspaces)
    return LoweredRegion(region, io, kernels, plan)


def _kernel_function(graph: Graph, kernel: BlasKernel) -> list[str]:
    lines = [f"/* {kernel.name}"]
    lines += [f" *   {node_line(graph, n)}" for n in kernel.group.nodes]
    if kernel.workspace:
        lines.append(f" *   col: im2col buffer, {kernel.workspace} bytes of scratch")
    lines.append(" */")
    params = ", ".join(p.declaration() for p in kernel.params)
    lines += [f"static void {kernel.name}({params})", "{", *kernel.body, "}", ""]
    return [*kernel.statics, *lines]


def _declaration(graph: Graph, lowered: LoweredRegion, tensor: str, local: str) -> str:
    tt = graph.type_of(tensor)
    shape = shape_text(tt.shape)
    if tensor in lowered.io.inputs:
        where = f"(const float *)in[{lowered.io.inputs.index(tensor)}]"
        return f"const float *{local} = {where}; /* {comment(f'input {tensor} {shape}')} */"
    if tensor in lowered.io.outputs:
        where = f"(float *)out[{lowered.io.outputs.index(tensor)}]"
        return f"float *{local} = {where}; /* {comment(f'output {tensor} {shape}')} */"
    if graph.is_weight(tensor):
        offset = graph.weight(tensor).offset
        return (f"const float *{local} = (const float *)(env->weights + {offset}); "
                f"/* {comment(f'weight {tensor} {shape}')} */")
    offset = lowered.plan.offsets[tensor]
    return (f"float *{local} = (float *)(scratch + {offset}); "
            f"/* {comment(f'{tensor} {shape}, {tt.nbytes} bytes')} */")


def _region_function(model: str, graph: Graph, lowered: LoweredRegion, threads: bool
                     ) -> list[str]:
    names = Names(_RESERVED)
    tensors = list(dict.fromkeys(p.tensor for k in lowered.kernels for p in k.params if p.tensor))
    code = Code()
    if lowered.plan.offsets:
        code.line("unsigned char *const scratch = env->scratch;")
    for tensor in tensors:
        code.line(_declaration(graph, lowered, tensor, names(tensor)))
    if not any(graph.is_weight(t) for t in tensors) and not lowered.plan.offsets:
        code.line("(void)env;")
    if not lowered.io.inputs:
        code.line("(void)in;")
    if threads:
        code.line("use_threads();")
    code.line()
    for kernel in lowered.kernels:
        args = [names(p.tensor) if p.tensor
                else f"(float *)(scratch + {lowered.plan.offsets[kernel.name + '_col']})"
                for p in kernel.params]
        what = comment(", ".join(f"{n.op} '{n.name}'" for n in kernel.group.nodes))
        code.line(f"{kernel.name}({', '.join(args)}); /* {what} */")
    code.line("return 0;")
    io = lowered.io
    region = lowered.region
    return [
        f"/* Region {region.id}: {len(region.nodes)} node(s) in {len(lowered.kernels)} "
        f"kernel(s), scratch {lowered.plan.total_bytes} bytes",
        f" *   inputs:  {comment(', '.join(_shaped(graph, t) for t in io.inputs) or '-')}",
        f" *   outputs: {comment(', '.join(_shaped(graph, t) for t in io.outputs) or '-')}",
        " */",
        f"int {model}__openblas_{region.id}(bg_env *env, const void *const *in, "
        "void *const *out)",
        "{",
        *code.lines,
        "}",
        "",
    ]


def _shaped(graph: Graph, tensor: str) -> str:
    return f"{tensor}{shape_text(graph.type_of(tensor).shape)}"


def _threads(library: Library) -> list[str]:
    p, n = library.prefix, library.threads
    return [
        "/* OpenBLAS's thread count is process-wide: every region sets the target's before it",
        " * calls into OpenBLAS (a cheap check when nothing else changed it). */",
        "static void use_threads(void)",
        "{",
        f"    if ({p}openblas_get_num_threads() != {n}) {p}openblas_set_num_threads({n});",
        "}",
        "",
    ]


def _ops_summary(graph: Graph, nodes: Sequence[str], limit: int = 6) -> str:
    ops = [graph.node(n).op for n in nodes]
    text = ", ".join(ops[:limit])
    return text + (f", ... ({len(ops) - limit} more)" if len(ops) > limit else "")


def render_module(
    model: str, graph: Graph, regions: Sequence[LoweredRegion], library: Library
) -> str:
    scratch = max((r.plan.total_bytes for r in regions), default=0)
    unshared = sum(r.plan.unshared_bytes for r in regions)
    source = graph.source
    if source and PurePath(source).is_absolute():
        source = PurePath(source).name  # no machine-specific paths in generated files
    threads = library.threads > 0
    head = [
        f"/* Model {model}: module of the openblas backend, generated by buildgen {__version__};"
        " do not edit.",
        f" * Source: {comment(source or '-')} (graph {comment(graph.name)!r}, opset {graph.opset})",
        f" * Library: {library.description}",
        " * Threads: " + (f"{library.threads}" if threads else "OpenBLAS's default"),
        " * Regions:",
        *(
            f" *   {r.region.id}: {len(r.region.nodes)} node(s), {len(r.kernels)} kernel(s): "
            + comment(_ops_summary(graph, r.region.nodes))
            for r in regions
        ),
        f" * Scratch: {scratch} bytes planned for {unshared} bytes of intermediates and"
        " im2col buffers.",
        " */",
        "#include <math.h>",
        "#include <stdint.h>",
        "#include <string.h>",
        "",
        "#include <cblas.h>",
        "",
        '#include "buildgen_abi.h"',
        '#include "bg_openblas.h"',
        "",
    ]
    body: list[str] = [*_threads(library)] if threads and regions else []
    for lowered in regions:
        for kernel in lowered.kernels:
            body += _kernel_function(graph, kernel)
    for lowered in regions:
        body += _region_function(model, graph, lowered, threads)
    create = ["    use_threads(); /* start OpenBLAS's threads now, not in the first run */"]
    tail = [
        f"const size_t {model}__openblas_scratch_bytes = {scratch};",
        "",
        "/* Nothing to allocate: intermediates and im2col buffers live in env->scratch. */",
        f"int {model}__openblas_create(bg_env *env)",
        "{",
        "    (void)env;",
        *(create if threads and regions else []),
        "    return 0;",
        "}",
        "",
        f"void {model}__openblas_destroy(bg_env *env)",
        "{",
        "    (void)env;",
        "}",
    ]
    return "\n".join([*head, *body, *tail]) + "\n"
