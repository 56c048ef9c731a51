"""model.c: the host executor. It owns the arena, creates every backend module, and runs the
regions in order, handing each the tensors that cross its edge.
"""

from __future__ import annotations

from dataclasses import dataclass

from buildgen import __version__
from buildgen.codegen import cnames
from buildgen.codegen.header import generate_header
from buildgen.codegen.memplan import Buffer, plan_memory
from buildgen.codegen.weights_asm import generate_weights_asm, weights_symbol
from buildgen.ir import Graph, Value
from buildgen.partition.boundaries import RegionIO, region_io
from buildgen.partition.model import Partition

ERROR_BYTES = 512


@dataclass(frozen=True)
class ExecutorSources:
    source_c: str
    header: str
    weights_asm: str
    boundary_bytes: int  # arena bytes for tensors passed between regions


@dataclass(frozen=True)
class _Plan:
    ios: tuple[RegionIO, ...]
    offsets: dict[str, int]  # boundary tensor -> arena offset
    total: int


def _plan(graph: Graph, partition: Partition) -> _Plan:
    ios = tuple(region_io(graph, r) for r in partition.regions)
    graph_io = set(graph.input_names) | set(graph.output_names)
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for step, io in enumerate(ios):
        for name in io.outputs:
            first.setdefault(name, step)
        for name in io.inputs:
            last[name] = step
    buffers = [
        Buffer(name, graph.type_of(name).nbytes, first[name], last.get(name, first[name]))
        for name in first
        if name not in graph_io
    ]
    plan = plan_memory(buffers)
    return _Plan(ios, dict(plan.offsets), plan.total_bytes)


def boundary_bytes(graph: Graph, partition: Partition) -> int:
    """Arena bytes the executor plans for tensors passed between regions."""
    return _plan(graph, partition).total


def _pointer(graph: Graph, plan: _Plan, name: str) -> str:
    # An input that is also an output is read from the input: the output gets its copy
    # only after the regions ran (_passthrough_outputs).
    if name in graph.input_names:
        return f"(void *)inputs[{graph.input_names.index(name)}]"
    if name in graph.output_names:
        return f"outputs[{graph.output_names.index(name)}]"
    return f"(void *)(m->arena + {plan.offsets[name]})"


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


def _declarations(model: str, partition: Partition) -> list[str]:
    lines = [f"extern const unsigned char {weights_symbol(model)}[];"]
    for backend in partition.backends:
        p = f"{model}__{backend}"
        lines += [
            f"/* backend module {backend} */",
            f"extern const size_t {p}_scratch_bytes;",
            f"int {p}_create(bg_env *env);",
            f"void {p}_destroy(bg_env *env);",
        ]
        for r in partition.regions_for(backend):
            lines.append(f"int {p}_{r.id}(bg_env *env, const void *const *in, void *const *out);")
    return lines


def _struct(model: str, partition: Partition) -> list[str]:
    envs = [f"    bg_env env_{b};" for b in partition.backends]
    return [
        f"struct {model}_model {{",
        "    unsigned char *arena; /* boundary tensors, then the scratch the backends share */",
        *envs,
        f"    char error[{ERROR_BYTES}];",
        "};",
    ]


def _scratch(model: str, partition: Partition) -> list[str]:
    """The backends run one region at a time, so they share one scratch area: the largest."""
    return [
        "static size_t scratch_bytes(void) {",
        "    size_t scratch = 0;",
        *(
            f"    if ({model}__{b}_scratch_bytes > scratch) scratch = {model}__{b}_scratch_bytes;"
            for b in partition.backends
        ),
        "    return scratch;",
        "}",
        "",
        f"size_t {model}_arena_bytes(void) {{",
        "    return BOUNDARY_BYTES + scratch_bytes();",
        "}",
    ]


def _create(model: str, partition: Partition) -> list[str]:
    lines = [
        f"int {model}_create({model}_model **out) {{",
        f"    {model}_model *m;",
        '    if (!out) { set_create_error("out is NULL"); return -1; }',
        "    *out = NULL;",
        f"    m = ({model}_model *)calloc(1, sizeof *m);",
        '    if (!m) { set_create_error("out of memory allocating the model"); return -1; }',
        f"    if (alloc_arena(&m->arena, {model}_arena_bytes()) != 0) {{",
        "        free(m);",
        '        set_create_error("out of memory allocating the arena");',
        "        return -1;",
        "    }",
    ]
    for b in partition.backends:
        lines += [
            f"    m->env_{b} = (bg_env){{{weights_symbol(model)}, m->arena + BOUNDARY_BYTES, NULL,"
            f" m->error, sizeof m->error, 0}};",
            f"    if ({model}__{b}_create(&m->env_{b}) != 0) {{",
            "        set_create_error(m->error);",
            f"        {model}_destroy(m);",
            "        return -1;",
            "    }",
        ]
    lines += ["    *out = m;", "    return 0;", "}"]
    return lines


def _run(model: str, graph: Graph, partition: Partition, plan: _Plan) -> list[str]:
    lines = [
        f"int {model}_run({model}_model *m, const void *const *inputs, void *const *outputs) {{",
        "    int i;",
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
    for region, io in zip(partition.regions, plan.ios, strict=True):
        ins = ", ".join(_pointer(graph, plan, n) for n in io.inputs) or "NULL"
        outs = ", ".join(_pointer(graph, plan, n) for n in io.outputs) or "NULL"
        shown = ", ".join(region.nodes[:4]) + (", ..." if len(region.nodes) > 4 else "")
        call = f"{model}__{region.target}_{region.id}(&m->env_{region.target}, in, out)"
        lines += [
            "    {",
            f"        /* region {region.id} on {region.target}: {len(region.nodes)} nodes"
            f" ({cnames.comment(shown)}) */",
            f"        const void *in[] = {{{ins}}};",
            f"        void *out[] = {{{outs}}};",
            f"        if ({call} != 0)",
            "            return -1;",
            "    }",
        ]
    lines += _passthrough_outputs(model, graph)
    lines += ["    return 0;", "}"]
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
    model: str, graph: Graph, partition: Partition, weights_path: str, weights_bytes: int
) -> ExecutorSources:
    plan = _plan(graph, partition)
    destroy = [
        f"    if (m->env_{b}.error) {model}__{b}_destroy(&m->env_{b});" for b in partition.backends
    ]
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
        "",
        '#include "buildgen_abi.h"',
        f'#include "{model}.h"',
        "",
        f"#define BOUNDARY_BYTES ((size_t){plan.total})",
        "",
        *_declarations(model, partition),
        "",
        *_struct(model, partition),
        "",
        *_table(model, "input", graph.inputs),
        *_table(model, "output", graph.outputs),
        "",
        _PRELUDE.format(model=model, error_bytes=ERROR_BYTES),
        *_scratch(model, partition),
        "",
        *_create(model, partition),
        "",
        *_run(model, graph, partition, plan),
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
    ]
    return ExecutorSources(
        source_c="\n".join(lines),
        header=generate_header(model, graph),
        weights_asm=generate_weights_asm(model, weights_path, weights_bytes),
        boundary_bytes=plan.total,
    )
