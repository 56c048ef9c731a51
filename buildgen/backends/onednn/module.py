"""Render a onednn module: one C translation unit with every onednn region of a model.

Layout: a header comment (model, source, threads, regions, scratch), the includes, the
constant arrays of folded BatchNormalizations, then per region its tensor table (an enum
naming each tensor and a bg_dnnl_tensor_spec array saying where it lives), the function
that builds its primitives at create (one commented block per group) and the exported
region function, which runs them. Last: M__onednn_scratch_bytes, _create and _destroy,
and with the host's `profile`, M__onednn_kernel_times (bg_onednn_profile.h).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath

import numpy as np

from buildgen import __version__
from buildgen.backends.c.cwriter import comment, shape_text
from buildgen.backends.cpu_common.carrays import static_array_lines
from buildgen.backends.onednn.layout import RegionLayout, TensorEntry, region_layout
from buildgen.backends.onednn.rnn import RECURRENT
from buildgen.backends.onednn.specs import Block, group_block
from buildgen.codegen import cnames
from buildgen.ir import Graph
from buildgen.partition.model import Region

FPMATH = {"strict": "dnnl_fpmath_mode_strict", "bf16": "dnnl_fpmath_mode_bf16",
          "tf32": "dnnl_fpmath_mode_tf32", "any": "dnnl_fpmath_mode_any"}
LAYOUTS = {"channels_last": "BG_DNNL_CHANNELS_LAST", "any": "BG_DNNL_ANY",
           "plain": "BG_DNNL_PLAIN"}
_ROLES = {"in": "BG_DNNL_IN", "out": "BG_DNNL_OUT", "internal": "BG_DNNL_INTERNAL"}


@dataclass(frozen=True)
class Settings:
    threads: int  # 0 = OpenMP's own setting
    fpmath: str  # a key of FPMATH
    layout: str = "channels_last"  # a key of LAYOUTS: how convolutions lay out activations
    timed: bool = False  # the host's profile: every step of a run is timed
    layout_origin: str = ""  # why this layout: set, or what tuning records measured


@dataclass(frozen=True)
class LoweredRegion:
    layout: RegionLayout
    blocks: tuple[Block, ...]

    @property
    def region(self) -> Region:
        return self.layout.region


def lower_region(graph: Graph, region: Region, first_kernel: int,
                 weights: Mapping[str, np.ndarray] | None, settings: Settings) -> LoweredRegion:
    layout = region_layout(graph, region, blocked=settings.layout == "any")
    blocks = tuple(group_block(g, first_kernel + i, layout, graph, weights)
                   for i, g in enumerate(layout.groups))
    return LoweredRegion(layout, blocks)


def _entry(entry: TensorEntry) -> str:
    dims = "{" + ", ".join(str(d) for d in entry.shape or (1,)) + "}"
    return (f"    [{entry.enum}] = {{{cnames.c_string(entry.name)}, {_ROLES[entry.role]}, "
            f"{entry.index}, {int(entry.flexible)}, {entry.offset}, {entry.bytes}, "
            f"{max(len(entry.shape), 1)}, {dims}}},")


def _where(entry: TensorEntry) -> str:
    if entry.role == "in":
        return f"in[{entry.index}]"
    if entry.role == "out":
        return f"out[{entry.index}]"
    layout = "any layout" if entry.flexible else "plain"
    return f"scratch + {entry.offset}, {entry.bytes} bytes, {layout}"


def _region(model: str, graph: Graph, lowered: LoweredRegion, position: int,
            timed: bool) -> list[str]:
    layout, rid = lowered.layout, lowered.region.id
    enum = [f"    {e.enum}, /* {comment(e.name)}{shape_text(e.shape)}: {_where(e)} */"
            for e in layout.tensors]
    io = layout.io
    lines = [
        f"/* Region {rid}: {len(lowered.region.nodes)} node(s) in {len(lowered.blocks)} "
        f"primitive group(s), arena {layout.plan.total_bytes} bytes",
        f" *   inputs:  {comment(', '.join(io.inputs) or '-')}",
        f" *   outputs: {comment(', '.join(io.outputs) or '-')}",
        " */",
        "enum {",
        *enum,
        "};",
        "",
        f"static const bg_dnnl_tensor_spec {rid}_tensors[] = {{",
        "    /* name, role, in/out index, flexible layout, arena offset, arena bytes, dims */",
        *(_entry(e) for e in layout.tensors),
        "};",
        "",
        f"static int create_{rid}(bg_dnnl_module *m, bg_dnnl_region *r)",
        "{",
        *([f'    r->id = "{rid}"; /* the labels of its timed steps */'] if timed else []),
        f"    if (bg_dnnl_region_init(m, r, {rid}_tensors, {len(layout.tensors)}) != 0) return -1;",
    ]
    for block in lowered.blocks:
        lines += [f"    {line}" for line in block.lines]
    lines += [
        "    return 0;",
        "}",
        "",
        f"int {model}__onednn_{rid}(bg_env *env, const void *const *in, void *const *out)",
        "{",
        "    bg_dnnl_module *m = (bg_dnnl_module *)env->state;",
        f"    return bg_dnnl_run(m, &m->regions[{position}], in, out, \"region {rid}\");",
        "}",
        "",
    ]
    return lines


def _create(model: str, regions: Sequence[LoweredRegion], settings: Settings) -> list[str]:
    if not regions:
        return [f"int {model}__onednn_create(bg_env *env)", "{", "    (void)env;",
                "    return 0;", "}"]
    calls = [f"    if (rc == 0) rc = create_{r.region.id}(m, &m->regions[{i}]);"
             for i, r in enumerate(regions)]
    return [
        "/* Builds every primitive once: weights are reordered into the layouts the",
        " * primitives prefer, and each region's steps are recorded for its runs. */",
        f"int {model}__onednn_create(bg_env *env)",
        "{",
        "    bg_dnnl_module *m = (bg_dnnl_module *)calloc(1, sizeof *m);",
        '    if (m == NULL) return bg_dnnl_fail(env, "create", "out of memory");',
        "    env->state = m;",
        f"    int rc = bg_dnnl_module_init(m, env, {settings.threads}, "
        f"{FPMATH[settings.fpmath]}, {LAYOUTS[settings.layout]}, {len(regions)});",
        "    if (rc != 0) return rc;",
        "    int previous = bg_dnnl_use_threads(m);",
        *calls,
        "    if (rc == 0) rc = bg_dnnl_module_finish(m);",
        "    bg_dnnl_restore_threads(m, previous);",
        "    return rc;",
        "}",
    ]


def render_module(model: str, graph: Graph, regions: Sequence[LoweredRegion],
                  settings: Settings) -> str:
    scratch = max((r.layout.plan.total_bytes for r in regions), default=0)
    source = graph.source
    if source and PurePath(source).is_absolute():
        source = PurePath(source).name  # no machine-specific paths in generated files
    threads = str(settings.threads) if settings.threads else "OpenMP's default"
    head = [
        f"/* Model {model}: module of the onednn backend, generated by buildgen {__version__};"
        " do not edit.",
        f" * Source: {comment(source or '-')} (graph {comment(graph.name)!r}, opset {graph.opset})",
        f" * oneDNN 3.x C API; threads: {threads}; fpmath mode: {settings.fpmath}",
        f" * Activation layout: {settings.layout}"
        + (f" ({comment(settings.layout_origin)})" if settings.layout_origin else ""),
        " * Regions:",
        *(
            f" *   {r.region.id}: "
            + comment(", ".join(f"k{_first_kernel(regions, r) + i}" for i in range(len(r.blocks))))
            + f" ({len(r.region.nodes)} node(s))"
            for r in regions
        ),
        f" * Arena: {scratch} bytes for tensors inside regions; weights in the primitives'",
        " * layouts, reorder temporaries and the shared scratchpad are allocated at create.",
        " */",
        "#ifndef _GNU_SOURCE /* madvise (bg_alloc.h), clock_gettime: before any include */",
        "#define _GNU_SOURCE",
        "#endif",
        *(["#define BG_DNNL_PROFILE 1 /* profile: true: every step of a run is timed */"]
          if settings.timed else []),
        "#include <math.h>  /* INFINITY, NAN: a post-op's bounds (a Clip with one side open) */",
        "#include <stdlib.h>",
        "",
        '#include "buildgen_abi.h"',
        '#include "bg_onednn_ops.h"',
        *(['#include "bg_onednn_rnn.h"'] if _has_rnn(regions) else []),
        "",
    ]
    body: list[str] = []
    for lowered in regions:
        for block in lowered.blocks:
            for array in block.arrays:
                body += static_array_lines(array)
    if body:
        body.append("")
    for position, lowered in enumerate(regions):
        body += _region(model, graph, lowered, position, settings.timed)
    tail = [
        f"const size_t {model}__onednn_scratch_bytes = {scratch};",
        "",
        *_create(model, regions, settings),
        "",
        f"void {model}__onednn_destroy(bg_env *env)",
        "{",
        "    bg_dnnl_module *m = (bg_dnnl_module *)env->state;",
        "    if (m == NULL) return;",
        "    bg_dnnl_module_free(m);",
        "    free(m);",
        "    env->state = NULL;",
        "}",
        *(_kernel_times(model) if settings.timed else []),
    ]
    return "\n".join([*head, *body, *tail]) + "\n"


def _kernel_times(model: str) -> list[str]:
    return [
        "",
        "/* profile: true: every step of the module's runs, in run order (buildgen_abi.h). */",
        f"bg_kernel_times {model}__onednn_kernel_times(const bg_env *env)",
        "{",
        "    const bg_dnnl_module *m = (const bg_dnnl_module *)env->state;",
        "    const bg_kernel_times none = {0, NULL, NULL};",
        "    return m ? bg_dnnl_kernel_times(&m->timers) : none;",
        "}",
    ]


def _has_rnn(regions: Sequence[LoweredRegion]) -> bool:
    return any(g.anchor is not None and g.anchor.op in RECURRENT
               for r in regions for g in r.layout.groups)


def _first_kernel(regions: Sequence[LoweredRegion], region: LoweredRegion) -> int:
    count = 0
    for other in regions:
        if other is region:
            return count
        count += len(other.blocks)
    return count
