"""model.c: the host executor. It owns the arenas, creates every backend module, and runs the
regions in order, handing each the tensors that cross its edge.

With device (cuda) regions it also owns the device side (buildgen.codegen.executor_cuda):
one stream per instance, a device arena planned like the host one, the weights uploaded once
at create, and the host <-> device copies the partition records, made where they cross.
model.c stays plain C: the CUDA runtime's C API is all it calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from buildgen import __version__
from buildgen.codegen import cnames, executor_cuda, profile
from buildgen.codegen.header import generate_header
from buildgen.codegen.isa import (
    ONE_ISA,
    IsaPlan,
    check_pinned,
    pick_variant,
    suffix,
    variant_table,
)
from buildgen.codegen.placement import CUDA, Placement, plan_placement
from buildgen.codegen.weights_asm import generate_weights_asm, weights_symbol
from buildgen.ir import Graph, Value
from buildgen.partition.model import Partition
from buildgen.targets import get_kind
from buildgen.targets.kinds import HOST_DEVICE

ERROR_BYTES = 512


@dataclass(frozen=True)
class ExecutorSources:
    source_c: str
    header: str
    weights_asm: str
    boundary_bytes: int  # host arena bytes for tensors passed between regions
    device_boundary_bytes: int = 0  # device arena bytes for them


def boundary_bytes(graph: Graph, partition: Partition) -> int:
    """Host arena bytes the executor plans for tensors passed between regions."""
    return plan_placement(graph, partition).host_total


def device_boundary_bytes(graph: Graph, partition: Partition) -> int:
    """Device arena bytes the executor plans for them (0 without device regions)."""
    return plan_placement(graph, partition).device_total


def _device_backends(partition: Partition) -> tuple[str, ...]:
    return tuple(b for b in partition.backends if get_kind(b).device != HOST_DEVICE)


def _host_backends(partition: Partition) -> tuple[str, ...]:
    return tuple(b for b in partition.backends if get_kind(b).device == HOST_DEVICE)


def pointer(graph: Graph, plan: Placement, name: str, device: str) -> str:
    """A C expression for tensor `name`'s buffer on `device` during run()."""
    if device == CUDA:
        return f"(void *)(m->device_arena + {plan.device_offsets[name]})"
    # An input that is also an output is read from the input: the output gets its copy
    # only after the regions ran (_passthrough_outputs).
    if name in graph.input_names:
        return f"(void *)inputs[{graph.input_names.index(name)}]"
    if name in graph.output_names:
        return f"outputs[{graph.output_names.index(name)}]"
    return f"(void *)(m->arena + {plan.host_offsets[name]})"


def _table(model: str, kind: str, values: tuple[Value, ...]) -> list[str]:
    shapes = []
    for i, v in enumerate(values):
        dims = ", ".join(str(d) for d in v.type.shape) or "1"
        shapes.append(f"static const int64_t {model}_{kind}_shape_{i}[] = {{{dims}}};")

    def arr(ctype: str, name: str, items: list[str]) -> str:
        body = ", ".join(items) if items else "0"
        return f"const {ctype} {model}_{kind}_{name}[] = {{{body}}};"

    return [
        *shapes,
        f"const int {model}_num_{kind}s = {len(values)};",
        arr("char *const", "names", [cnames.c_string(v.name) for v in values]),
        arr("char *const", "dtypes", [f'"{v.type.dtype.value}"' for v in values]),
        arr("int", "ranks", [str(v.type.rank) for v in values]),
        arr("int64_t *const", "shapes", [f"{model}_{kind}_shape_{i}" for i in range(len(values))]),
        arr("size_t", "bytes", [str(v.type.nbytes) for v in values]),
    ]


def _module_functions(partition: Partition, backend: str, timed: bool,
                      ) -> list[tuple[str, str, str]]:
    """(return type, name after M__<backend>_, parameters) of a module's functions."""
    region = "bg_env *env, const void *const *in, void *const *out"
    return [
        ("int", "create", "bg_env *env"),
        ("void", "destroy", "bg_env *env"),
        *(("int", r.id, region) for r in partition.regions_for(backend)),
        *profile.module_functions(backend, partition, timed),
    ]


def _declarations(model: str, partition: Partition, isa: IsaPlan, timed: bool) -> list[str]:
    lines = [f"extern const unsigned char {weights_symbol(model)}[];"]
    for backend in partition.backends:
        p = f"{model}__{backend}"
        levels = isa.levels(backend)
        functions = _module_functions(partition, backend, timed)
        if not levels:
            lines += [f"/* backend module {backend} */", f"extern const size_t {p}_scratch_bytes;"]
            lines += [f"{t} {p}_{f}({a});" for t, f, a in functions]
            continue
        lines += variant_table(p, backend, levels, functions)
    return lines


def _struct(model: str, partition: Partition, plan: Placement, isa: IsaPlan, timed: bool,
            ) -> list[str]:
    envs = [f"    bg_env env_{b};" for b in partition.backends]
    tables = [
        f"    const {model}__{b}_module *{b}; /* the variant create picked */"
        for b in partition.backends if isa.levels(b)
    ]
    return [
        f"struct {model}_model {{",
        "    unsigned char *arena; /* boundary tensors, then the scratch the backends share */",
        *(executor_cuda.STRUCT_FIELDS if plan.uses_device else []),
        *envs,
        *tables,
        *(profile.struct_fields(partition) if timed else []),
        "    const char *cpu_isa;",
        f"    char error[{ERROR_BYTES}];",
        "};",
    ]


def _max_scratch(model: str, name: str, backends: tuple[str, ...], isa: IsaPlan) -> list[str]:
    # A module compiled per level has one figure per variant (the same: the kernels' blocking
    # and hence their workspaces do not depend on the ISA); the largest is safe either way.
    symbols = [
        f"{model}__{b}_scratch_bytes{level_suffix}"
        for b in backends
        for level_suffix in ([suffix(lv) for lv in isa.levels(b)] or [""])
    ]
    return [
        f"static size_t {name}(void) {{",
        "    size_t scratch = 0;",
        *(f"    if ({s} > scratch) scratch = {s};" for s in symbols),
        "    return scratch;",
        "}",
    ]


def _scratch(model: str, partition: Partition, plan: Placement, isa: IsaPlan) -> list[str]:
    """The backends run one region at a time, so they share one scratch area: the largest.
    Device backends share theirs in the device arena."""
    if not plan.uses_device:
        return [
            *_max_scratch(model, "scratch_bytes", partition.backends, isa),
            "",
            f"size_t {model}_arena_bytes(void) {{",
            "    return BOUNDARY_BYTES + scratch_bytes();",
            "}",
        ]
    return [
        *_max_scratch(model, "scratch_bytes", _host_backends(partition), isa),
        "",
        *_max_scratch(model, "device_scratch_bytes", _device_backends(partition), isa),
        "",
        f"size_t {model}_arena_bytes(void) {{",
        "    return BOUNDARY_BYTES + scratch_bytes();",
        "}",
        "",
        f"size_t {model}_device_arena_bytes(void) {{",
        "    return DEVICE_BOUNDARY_BYTES + device_scratch_bytes();",
        "}",
    ]


def _call(model: str, backend: str, function: str, isa: IsaPlan) -> str:
    """The C function expression of a module's function: direct, or the picked variant's."""
    if isa.levels(backend):
        return f"m->{backend}->{function}"
    return f"{model}__{backend}_{function}"


def _create(model: str, partition: Partition, plan: Placement, weights_bytes: int,
            isa: IsaPlan) -> list[str]:
    lines = [
        f"int {model}_create({model}_model **out) {{",
        f"    {model}_model *m;",
        '    if (!out) { set_create_error("out is NULL"); return -1; }',
        "    *out = NULL;",
        *check_pinned(isa),
        f"    m = ({model}_model *)calloc(1, sizeof *m);",
        '    if (!m) { set_create_error("out of memory allocating the model"); return -1; }',
        f"    if (alloc_arena(&m->arena, {model}_arena_bytes()) != 0) {{",
        "        free(m);",
        '        set_create_error("out of memory allocating the arena");',
        "        return -1;",
        "    }",
        f"    m->cpu_isa = {cnames.c_string(isa.pinned or 'default')};",
    ]
    if plan.uses_device:
        lines += executor_cuda.create_device(model, weights_bytes)
    device_backends = _device_backends(partition)
    for b in partition.backends:
        if b in device_backends:
            env = ("(const unsigned char *)m->device_weights, m->device_arena + "
                   "DEVICE_BOUNDARY_BYTES, NULL, m->error, sizeof m->error, 0, (void *)m->stream")
        else:
            env = (f"{weights_symbol(model)}, m->arena + BOUNDARY_BYTES, NULL, m->error, "
                   "sizeof m->error, 0, NULL")
        if isa.levels(b):
            lines += pick_variant(model, b, host=get_kind(b).device == HOST_DEVICE)
        lines += [
            f"    m->env_{b} = (bg_env){{{env}}};",
            f"    if ({_call(model, b, 'create', isa)}(&m->env_{b}) != 0) {{",
            "        set_create_error(m->error);",
            f"        {model}_destroy(m);",
            "        return -1;",
            "    }",
        ]
    lines += ["    *out = m;", "    return 0;", "}"]
    return lines


def _run(model: str, graph: Graph, partition: Partition, plan: Placement, isa: IsaPlan,
         timed: bool) -> list[str]:
    lines = [
        f"int {model}_run({model}_model *m, const void *const *inputs, void *const *outputs) {{",
        "    int i;",
        *(executor_cuda.RUN_LOCALS if plan.uses_device else []),
        "    if (!m) return -1;",
        "    m->error[0] = '\\0';",
        # An empty tensor's pointer may be NULL: nothing reads or writes through it.
        f"    for (i = 0; i < {len(graph.inputs)}; ++i)",
        f"        if (!inputs || (!inputs[i] && {model}_input_bytes[i] != 0))",
        '            return fail(m, "input", i);',
        f"    for (i = 0; i < {len(graph.outputs)}; ++i)",
        f"        if (!outputs || (!outputs[i] && {model}_output_bytes[i] != 0))",
        '            return fail(m, "output", i);',
    ]
    pending = False  # device work enqueued since the stream was last synchronized
    for index, (region, io, device) in enumerate(
            zip(partition.regions, plan.ios, plan.devices, strict=True)):
        copies = plan.transfers_before(region.id)
        lines += executor_cuda.copies(graph, plan, copies, f"before region {region.id}")
        pending = pending or bool(copies)
        if device == HOST_DEVICE and pending:
            # A host region reads what the device copied back, and may overwrite host
            # buffers an enqueued copy still reads: the stream must be idle.
            lines += executor_cuda.synchronize(f"before region {region.id}")
            pending = False
        pending = pending or device != HOST_DEVICE
        ins = ", ".join(pointer(graph, plan, n, device) for n in io.inputs) or "NULL"
        outs = ", ".join(pointer(graph, plan, n, device) for n in io.outputs) or "NULL"
        shown = ", ".join(region.nodes[:4]) + (", ..." if len(region.nodes) > 4 else "")
        call = f"{_call(model, region.target, region.id, isa)}(&m->env_{region.target}, in, out)"
        lines += [
            "    {",
            f"        /* region {region.id} on {region.target}: {len(region.nodes)} nodes"
            f" ({cnames.comment(shown)}) */",
            f"        const void *in[] = {{{ins}}};",
            f"        void *out[] = {{{outs}}};",
            *(profile.region_start() if timed else []),
            f"        if ({call} != 0)",
            "            return -1;",
        ]
        if timed and device != HOST_DEVICE:  # the device's time, not the launch's
            lines += [f"    {line}" for line in executor_cuda.synchronize(
                f"after region {region.id} (profile)")]
            pending = False
        lines += [*(profile.region_end(index) if timed else []), "    }"]
    last = plan.transfers_before("")
    lines += executor_cuda.copies(graph, plan, last, "after the last region")
    if pending or last:
        lines += executor_cuda.synchronize("at the end of run")
    lines += _passthrough_outputs(model, graph)
    lines += [*(profile.run_end() if timed else []), "    return 0;", "}"]
    return lines


def _passthrough_outputs(model: str, graph: Graph) -> list[str]:
    """Outputs no node produces (an input or a weight returned as is) are copied."""
    lines = []
    for j, out in enumerate(graph.outputs):
        if graph.producer(out.name) is not None or out.type.nbytes == 0:
            continue
        if out.name in graph.input_names:
            src = f"inputs[{graph.input_names.index(out.name)}]"
        else:
            src = f"{weights_symbol(model)} + {graph.weight(out.name).offset}"
        lines.append(f"    memcpy(outputs[{j}], {src}, {out.type.nbytes});")
    return lines


_PRELUDE = """\
static _Thread_local char create_error[{error_bytes}];

static void set_create_error(const char *message) {{
    snprintf(create_error, sizeof create_error, "%s", message);
}}

static int alloc_arena(unsigned char **arena, size_t bytes) {{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) return -1;
    *arena = (unsigned char *)p;
    return 0;
}}

static int fail({model}_model *m, const char *what, int index) {{
    snprintf(m->error, sizeof m->error, "%s %d is NULL", what, index);
    return -1;
}}
"""


def generate_executor(
    model: str, graph: Graph, partition: Partition, weights_path: str, weights_bytes: int,
    isa: IsaPlan = ONE_ISA, timed: bool = False,
) -> ExecutorSources:
    """model.c, the header and weights.S; `timed`: with per-region timing (the target's
    `profile`, codegen/profile.py)."""
    plan = plan_placement(graph, partition)
    # env.error is set just before a module's create: only created modules are destroyed.
    destroy = [
        f"    if (m->env_{b}.error) {_call(model, b, 'destroy', isa)}(&m->env_{b});"
        for b in partition.backends
    ]
    if plan.uses_device:
        destroy += executor_cuda.DESTROY
    lines = [
        f"/* Executor of model {model} (target {partition.target}),"
        f" from {graph.source or graph.name}.",
        f" * Generated by buildgen {__version__}; do not edit.",
        f" * {len(partition.regions)} region(s): "
        + ", ".join(f"{r.id} on {r.target}" for r in partition.regions),
        " */",
        "#define _POSIX_C_SOURCE 200112L",
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "#include <string.h>",
        *(profile.includes() if timed else []),
        "",
        *(["#include <cuda_runtime_api.h>"] if plan.uses_device else []),
        '#include "buildgen_abi.h"',
        *(['#include "bg_cpu.h"'] if isa.checks_cpu else []),
        f'#include "{model}.h"',
        "",
        f"#define BOUNDARY_BYTES ((size_t){plan.host_total})",
        *([f"#define DEVICE_BOUNDARY_BYTES ((size_t){plan.device_total})"]
          if plan.uses_device else []),
        "",
        *_declarations(model, partition, isa, timed),
        "",
        *_struct(model, partition, plan, isa, timed),
        "",
        *_table(model, "input", graph.inputs),
        *_table(model, "output", graph.outputs),
        "",
        _PRELUDE.format(model=model, error_bytes=ERROR_BYTES),
        *([profile.prelude()] if timed else []),
        *([executor_cuda.prelude(model)] if plan.uses_device else []),
        *_scratch(model, partition, plan, isa),
        "",
        *_create(model, partition, plan, weights_bytes, isa),
        "",
        *_run(model, graph, partition, plan, isa, timed),
        "",
        f"void {model}_destroy({model}_model *m) {{",
        "    if (!m) return;",
        *destroy,
        "    free(m->arena);",
        "    free(m);",
        "}",
        "",
        f"const char *{model}_last_error(const {model}_model *m) {{",
        "    return m ? m->error : create_error;",
        "}",
        "",
        f"const char *{model}_cpu_isa(const {model}_model *m) {{",
        "    return m ? m->cpu_isa : NULL;",
        "}",
        "",
        *(profile.functions(model, partition, [
            f"{_call(model, b, 'kernel_times', isa)}(&m->env_{b})"
            for b in profile.kernel_timers(partition, timed)]) if timed else []),
    ]
    return ExecutorSources(
        source_c="\n".join(lines),
        header=generate_header(model, graph, device=plan.uses_device,
                               profile_regions=len(partition.regions) if timed else None),
        weights_asm=generate_weights_asm(model, weights_path, weights_bytes),
        boundary_bytes=plan.host_total,
        device_boundary_bytes=plan.device_total,
    )
