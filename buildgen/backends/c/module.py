"""Render the lowered regions as one C translation unit (buildgen_abi.h's module ABI).

Layout of the file: a header comment (model, source, regions, scratch), the includes, one
static function per kernel (with the ONNX nodes it implements), then per region the
exported function that binds tensors to named pointers and calls the kernels in order,
and finally M__c_scratch_bytes, M__c_create and M__c_destroy (instance.py). Exported names
go through BG_EXPORT (buildgen_abi.h): without `march` the file is compiled once per ISA
level, and each object's names carry its level.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from buildgen import __version__
from buildgen.backends.c import kernel_times
from buildgen.backends.c.cwriter import (
    Code,
    Names,
    comment,
    initializer_lines,
    shape_text,
    signature,
)
from buildgen.backends.c.instance import (
    GNU_SOURCE,
    PackedLayout,
    instance_struct,
    packed_layout,
    pool_workspace,
    render_create,
    threads_text,
)
from buildgen.backends.c.kernel import Kernel, View
from buildgen.backends.c.lower import Copy, InPlace, LoweredRegion, Storage
from buildgen.backends.c.split import render_split
from buildgen.codegen import cnames
from buildgen.ir import Graph, Node

# Names the region function itself uses, so no tensor local may take them.
_RESERVED = (
    *("env", "in", "out", "scratch", "state", "fail", "memcpy", "NULL", "NAN", "INFINITY"),
    *("instance", "c_instance", "pool", "packed"),
    *("int64_t", "int32_t", "uint8_t", "size_t"),
)


def _tensor(graph: Graph, name: str) -> str:
    return f"{name}{shape_text(graph.type_of(name).shape)}"


def _node_line(graph: Graph, node: Node) -> str:
    ins = ", ".join(_tensor(graph, t) for t in node.inputs if t)
    outs = ", ".join(_tensor(graph, t) for t in node.outputs if t)
    return comment(f"{node.op} '{node.name}': {ins} -> {outs}")


def _kernel_function(graph: Graph, name: str, kernel: Kernel) -> list[str]:
    lines = [f"/* {name}"]
    lines += [f" *   {_node_line(graph, n)}" for n in kernel.nodes]
    if kernel.workspace:
        lines.append(f" *   workspace: {kernel.workspace} bytes")
    lines.append(" */")
    body = list(kernel.body)
    if kernel.struct is not None:
        ctype, fields = kernel.struct
        init = initializer_lines(fields)
        lines += [f"static const {ctype} {name}_params = {init[0]}", *init[1:-1], f"{init[-1]};"]
        body.insert(0, f"    const {ctype} *const p = &{name}_params;")
    if kernel.split:
        return [*lines, *render_split(name, kernel, body)]
    ret = "static int" if kernel.fallible else "static void"
    lines += signature(ret, name, [p.declaration() for p in kernel.params])
    return [*lines, "{", *body, "}", ""]


def _pointer_decl(graph: Graph, local: str, tensor: str, storage: Storage, names: Names) -> str:
    tt = graph.type_of(tensor)
    ctype = tt.dtype.c_type
    note = tensor if local == tensor else f"'{tensor}'"
    shape = shape_text(tt.shape)
    if storage.kind == "input":
        cast = f"(const {ctype} *)in[{storage.where}]"
        return f"const {ctype} *{local} = {cast}; /* {comment(f'input {note} {shape}')} */"
    if storage.kind == "output":
        cast = f"({ctype} *)out[{storage.where}]"
        return f"{ctype} *{local} = {cast}; /* {comment(f'output {note} {shape}')} */"
    if storage.kind == "weight":
        return (
            f"const {ctype} *{local} = (const {ctype} *)(env->weights + {storage.where}); "
            f"/* {comment(f'weight {note} {shape}')} */"
        )
    if storage.kind == "scratch":
        return (
            f"{ctype} *{local} = ({ctype} *)(scratch + {storage.where}); "
            f"/* {comment(f'{note} {shape}, {tt.nbytes} bytes')} */"
        )
    source = names(storage.source)
    if storage.kind == "part":
        at = storage.where // tt.dtype.itemsize
        where = comment(f"{note} {shape}: written in place in '{storage.source}' (a Concat)")
        return f"{ctype} *{local} = {source} + {at}; /* {where} */"
    return f"const {ctype} *{local} = {source}; /* {comment(f'view {note} {shape}')} */"


def _referenced(lowered: LoweredRegion) -> list[str]:
    """Tensors the region function names, in declaration order (views after sources)."""
    used: list[str] = []
    for step in lowered.steps:
        if isinstance(step, Kernel):
            used += [p.tensor for p in step.params if p.tensor]
        elif isinstance(step, Copy):
            used += [step.source, step.output]
    closure: dict[str, int] = {}  # tensor -> position of first reference (ties in rank)
    for tensor in used:
        while tensor not in closure:
            closure[tensor] = len(closure)
            st = lowered.storage[tensor]
            if st.kind not in ("alias", "part"):
                break
            tensor = st.source
    written: dict[str, int] = {}  # tensor -> step that first writes it
    for s, step in enumerate(lowered.steps):
        if isinstance(step, Kernel):
            for out in step.outputs:
                written.setdefault(out, s)
    order = {"input": 0, "weight": 1, "output": 2, "scratch": 3, "alias": 4, "part": 4}

    def rank(t: str) -> tuple[int, int, int]:
        st = lowered.storage[t]
        where = written.get(t, 0) if st.kind == "scratch" else st.where
        return order[st.kind], where, closure[t]

    ranked = sorted(closure, key=rank)
    # Views keep step order so each comes after the tensor it aliases; the pieces of a
    # Concat written in place come after the whole they are part of (scratch or output).
    views = [s.output for s in lowered.steps if isinstance(s, View) and s.output in closure]
    pieces = sorted((t for t in closure if lowered.storage[t].kind == "part"),
                    key=lambda t: (written.get(t, 0), closure[t]))
    return [t for t in ranked if lowered.storage[t].kind not in ("alias", "part")] + pieces + [
        v for v in views if lowered.storage[v].kind == "alias"
    ]


def _region_function(model: str, graph: Graph, lowered: LoweredRegion, packed: PackedLayout,
                     first_kernel: int | None = None) -> list[str]:
    """`first_kernel`: with profile, the counter of the region's first kernel (its others
    follow in order); None: kernels are not timed."""
    region, io = lowered.region, lowered.io
    names = Names(_RESERVED)
    code = Code()
    declared = _referenced(lowered)
    uses_scratch = bool(lowered.workspace_offsets) or any(
        lowered.storage[t].kind == "scratch" for t in declared
    )
    kernels = [step for step in lowered.steps if isinstance(step, Kernel)]
    uses_state = any(step.packed for step in kernels)
    uses_pool = any(step.uses_pool for step in kernels)
    timed = first_kernel is not None and bool(kernels)
    if uses_scratch:
        code.line("unsigned char *const scratch = env->scratch;")
    if timed:
        code.line("c_instance *const instance = (c_instance *)env->state;")
        code.line("uint64_t profile_start;")
    elif uses_state or uses_pool:
        code.line("const c_instance *const instance = (const c_instance *)env->state;")
    if uses_state:
        code.line("const unsigned char *const state = instance->packed;")
    if uses_pool:
        code.line("bg_threadpool *const pool = instance->pool;")
    for tensor in declared:
        code.line(_pointer_decl(graph, names(tensor), tensor, lowered.storage[tensor], names))
    uses = {"env": uses_scratch or uses_state or uses_pool or timed
            or any(lowered.storage[t].kind == "weight" for t in declared)}
    uses["in"] = any(lowered.storage[t].kind == "input" for t in declared)
    uses["out"] = any(lowered.storage[t].kind == "output" for t in declared)
    code.line()
    counter = first_kernel or 0
    for s, step in enumerate(lowered.steps):
        if isinstance(step, View):
            continue
        if isinstance(step, InPlace):
            why = comment(f"{step.node.op} {step.node.name!r}: its pieces were written in place "
                          f"in {step.output!r} above")
            code.line(f"/* {why} */")
            continue
        if isinstance(step, Copy):
            why = comment(f"{step.node.op} {step.node.name!r} leaves the region: copy the view")
            code.line(
                f"memcpy({names(step.output)}, {names(step.source)}, {step.nbytes}); /* {why} */"
            )
            continue
        workspace = (
            f"scratch + {lowered.workspace_offsets[s]}"
            if s in lowered.workspace_offsets
            else "NULL"
        )
        args = [
            "pool" if p.pool
            else f"state + {packed[(region.id, s, p.name)]}" if p.packed
            else names(p.tensor) if p.tensor else workspace
            for p in step.params
        ]
        call = f"{lowered.kernel_names[s]}({', '.join(args)})"
        what = comment(", ".join(f"{n.op} {n.name!r}" for n in step.nodes))
        before, after = kernel_times.timing(counter) if timed else ("", "")
        counter += 1
        if before:
            code.line(before)
        failed = f"return fail(env, {cnames.c_string(step.error_message)});"
        if step.fallible and after:  # its time counts on both paths: one line after it
            uses["env"] = True
            with code.block(f"/* {what} */"):
                code.line(f"const int rc = {call};")
                code.line(after)
                code.line(f"if (rc != 0) {failed}")
        elif step.fallible:
            uses["env"] = True
            code.line(f"/* {what} */")
            code.line(f"if ({call} != 0) {failed}")
        else:
            code.line(f"{call}; /* {what} */")
            if after:
                code.line(after)
    code.line("return 0;")
    unused = [f"(void){name};" for name, used in uses.items() if not used]
    header = [
        f"/* Region {region.id}: {len(region.nodes)} node(s), {len(lowered.steps)} step(s), "
        f"scratch {lowered.plan.total_bytes} bytes",
        f" *   inputs:  {comment(', '.join(_tensor(graph, t) for t in io.inputs) or '-')}",
        f" *   outputs: {comment(', '.join(_tensor(graph, t) for t in io.outputs) or '-')}",
        " */",
        f"int BG_EXPORT({model}__c_{region.id})(bg_env *env, const void *const *in, "
        "void *const *out)",
        "{",
    ]
    return [*header, *(f"    {u}" for u in unused), *code.lines, "}", ""]


_FAIL = """\
/* Write `message` to the model's error buffer; returns the non-zero status to pass on. */
static int fail(bg_env *env, const char *message)
{
    if (env->error != NULL && env->error_size > 0) {
        size_t n = strlen(message);
        if (n >= env->error_size) n = env->error_size - 1;
        memcpy(env->error, message, n);
        env->error[n] = '\\0';
    }
    return 1;
}
"""


def render_module(model: str, graph: Graph, regions: Sequence[LoweredRegion], threads: int = 1,
                  timed: bool = False) -> str:
    """The module's C source; `threads` is the target's attribute (0: every CPU); `timed`:
    its `profile`, which times every kernel call (kernel_times.py)."""
    scratch = max((r.plan.total_bytes for r in regions), default=0)
    unshared = sum(r.plan.unshared_bytes for r in regions)
    layout, packed_bytes = packed_layout(regions)
    threads_used = pool_workspace(regions) is not None
    has_instance = bool(packed_bytes) or threads_used or timed
    source = graph.source
    if source and PurePath(source).is_absolute():
        source = PurePath(source).name  # no machine-specific paths in generated files
    head = [
        f"/* Model {model}: module of the c backend, generated by buildgen {__version__};"
        " do not edit.",
        f" * Source: {comment(source or '-')} (graph {comment(graph.name)!r}, opset {graph.opset})",
        " * Regions:",
        *(
            f" *   {r.region.id}: {len(r.region.nodes)} node(s), {len(r.kernel_names)} kernel(s): "
            + comment(_ops_summary(graph, r.region.nodes))
            for r in regions
        ),
        f" * Scratch: {scratch} bytes planned for {unshared} bytes of intermediates and"
        " workspaces.",
        *([f" * Packed weights: {packed_bytes} bytes, packed once per instance at create."]
          if packed_bytes else []),
        *([f" * Threads: {threads_text(threads)}, a pool per instance (bg_threads.h)."]
          if threads_used else []),
        *([f" * Profile: every kernel call is timed ({model}__c_kernel_times)."] if timed else []),
        " */",
        *(GNU_SOURCE if threads_used or timed else []),
        "#include <math.h>",
        "#include <stdint.h>",
        *(["#include <stdlib.h>"] if has_instance else []),
        "#include <string.h>",
        *(["#include <time.h>"] if timed else []),
        "",
        '#include "buildgen_abi.h"',
        '#include "bg_kernels.h"',
        "",
        *([instance_struct([kernel_times.counter_field(regions)] if timed else [])]
          if has_instance else []),
        *([kernel_times.CLOCK] if timed else []),
    ]
    body: list[str] = []
    needs_fail = timed  # create allocates the instance
    for lowered in regions:
        for s, step in enumerate(lowered.steps):
            if isinstance(step, Kernel):
                body += _kernel_function(graph, lowered.kernel_names[s], step)
                needs_fail = (needs_fail or step.fallible or bool(step.workspace_check)
                              or bool(step.packed) or step.uses_pool)
    first = 0
    for lowered in regions:
        body += _region_function(model, graph, lowered, layout, first if timed else None)
        first += len(lowered.kernel_names)
    tail = [f"const size_t BG_EXPORT({model}__c_scratch_bytes) = {scratch};", "",
            *render_create(model, graph, regions, threads, timed),
            *(["", *kernel_times.export(model, graph, regions)] if timed else [])]
    fail = [_FAIL] if needs_fail else []
    return "\n".join([*head, *fail, *body, *tail]) + "\n"


def _ops_summary(graph: Graph, nodes: Sequence[str], limit: int = 6) -> str:
    ops = [graph.node(n).op for n in nodes]
    text = ", ".join(ops[:limit])
    return text + (f", ... ({len(ops) - limit} more)" if len(ops) > limit else "")
