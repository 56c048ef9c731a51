"""What a c module's create makes for one model instance, and its destroy frees.

The instance (env->state, a `c_instance`) holds the thread pool the kernels share their
work with (bg_threads.h; none when no kernel takes the pool) and the constant operands
packed once at create (GEMM weights, conv filters, folded BatchNormalizations), laid out
by `packed_layout`. create first checks every planned workspace and packed size against
what the kernel library asks for.
"""

from __future__ import annotations

from collections.abc import Sequence

from buildgen.backends.c.cwriter import Code, comment
from buildgen.backends.c.kernel import Kernel
from buildgen.backends.c.lower import LoweredRegion
from buildgen.codegen import cnames
from buildgen.ir import Graph

# Where each packed operand lives in env->state: (region id, step, param) -> byte offset.
PackedLayout = dict[tuple[str, int, str], int]


def packed_layout(regions: Sequence[LoweredRegion]) -> tuple[PackedLayout, int]:
    """Every kernel's packed operands in one block, each 64-byte aligned; and its size."""
    layout: PackedLayout = {}
    total = 0
    for lowered in regions:
        for s, step in enumerate(lowered.steps):
            for packed in step.packed if isinstance(step, Kernel) else ():
                layout[(lowered.region.id, s, packed.param)] = total
                total += (packed.nbytes + 63) // 64 * 64
    return layout, total


def _pack_weights(graph: Graph, regions: Sequence[LoweredRegion], layout: PackedLayout,
                  total: int) -> list[str]:
    """create()'s packing: one allocation for every packed operand, then each packed."""
    if not total:
        return []
    code = Code(indent=2)
    message = f"c backend: out of memory for the {total} bytes of packed weights"
    code.line(f"unsigned char *const packed = (unsigned char *)bg_alloc_constants({total});")
    code.line("if (packed == NULL)")
    code.line(f"    return fail(env, {cnames.c_string(message)});")
    code.line("instance->packed = packed;")
    for lowered in regions:
        for s, step in enumerate(lowered.steps):
            for pk in step.packed if isinstance(step, Kernel) else ():
                name = lowered.kernel_names[s]
                offset = layout[(lowered.region.id, s, pk.param)]
                src, *sources = (f"(const float *)(env->weights + {graph.weight(t).offset})"
                                 for t in (pk.tensor, *pk.sources))
                code.line(f"/* {name}: {comment(', '.join((pk.tensor, *pk.sources)))} -> "
                          f"state + {offset} */")
                code.line(pk.pack.format(src=src, dst=f"packed + {offset}",
                                         params=f"&{name}_params",
                                         **{f"src{k}": v for k, v in enumerate(sources, 1)}))
    return ["    {", *code.lines, "    }"]


def _library_checks(regions: Sequence[LoweredRegion]) -> list[str]:
    """create()'s checks that each planned workspace and packed size covers what the kernel
    library asks for: workspace.py mirrors its sizes, and drift must fail loudly, not
    overrun."""
    code = Code()
    checks: list[tuple[str, str, int, str]] = []  # (kernel, C expression, planned, what)
    for lowered in regions:
        for s, step in enumerate(lowered.steps):
            if not isinstance(step, Kernel):
                continue
            name = lowered.kernel_names[s]
            if step.workspace_check:
                checks.append((name, step.workspace_check, step.workspace, "needs more workspace"))
            checks += [(name, pk.check, pk.nbytes, f"packs {pk.tensor!r} into more")
                       for pk in step.packed]
    for name, expression, planned, what in checks:
        message = (
            f"c backend: {name} {what} than the {planned} bytes planned "
            "(bg_kernels.h and buildgen/backends/c/workspace.py disagree)"
        )
        code.line(f"if ({expression.format(params=f'&{name}_params')} > {planned})")
        code.line(f"    return fail(env, {cnames.c_string(message)});")
    return list(code.lines)


# sched_getaffinity (glibc declares it only with _GNU_SOURCE, before any include)
GNU_SOURCE = [
    "/* sched_getaffinity: the thread pool counts the CPUs this process may use */",
    "#ifndef _GNU_SOURCE",
    "#define _GNU_SOURCE",
    "#endif",
]

def instance_struct(extra: Sequence[str] = ()) -> str:
    """The c_instance type; `extra`: further fields (kernel_times.counter_field)."""
    return "\n".join([
        "/* What create makes for one model instance (env->state). */",
        "typedef struct c_instance {",
        "    bg_threadpool *pool;   /* the instance's threads; NULL: the caller's thread only */",
        "    unsigned char *packed; /* the constant operands packed at create */",
        *extra,
        "} c_instance;",
        "",
    ])


def pool_workspace(regions: Sequence[LoweredRegion]) -> int | None:
    """Workspace bytes each pool worker needs (the largest of the kernels that share their
    work with the pool), or None when no kernel does: the module then starts no threads."""
    sizes = [step.workspace for lowered in regions for step in lowered.steps
             if isinstance(step, Kernel) and step.uses_pool]
    return max(sizes) if sizes else None


def _start_threads(threads: int, workspace: int) -> list[str]:
    """create()'s thread pool: `threads` from the target, BUILDGEN_NUM_THREADS overriding."""
    setting = "every CPU this process may use" if threads == 0 else str(threads)
    code = Code(indent=2)
    code.line(f"/* threads: {setting} (target attribute `threads`); BUILDGEN_NUM_THREADS "
              "overrides */")
    code.line("char why[160];")
    code.line(f"const int threads = bg_threads_wanted({threads}, why, sizeof why);")
    code.line("if (threads < 0)")
    code.line("    return fail(env, why);")
    code.line("if (threads > 1) {")
    code.line(f"    instance->pool = bg_threadpool_create(threads, {workspace}, why, sizeof why);")
    code.line("    if (instance->pool == NULL)")
    code.line("        return fail(env, why);")
    code.line("}")
    return ["    {", *code.lines, "    }"]


def render_create(model: str, graph: Graph, regions: Sequence[LoweredRegion], threads: int,
                  timed: bool = False) -> list[str]:
    """create and destroy; `timed`: the instance holds kernel counters (kernel_times.py)."""
    layout, total = packed_layout(regions)
    workspace = pool_workspace(regions)
    has_instance = bool(total) or workspace is not None or timed
    body = _library_checks(regions)
    if has_instance:
        message = cnames.c_string("c backend: out of memory for the model instance's state")
        body += [
            "    c_instance *const instance = (c_instance *)calloc(1, sizeof *instance);",
            "    if (instance == NULL)",
            f"        return fail(env, {message});",
            "    env->state = instance;",
        ]
    if workspace is not None:
        body += _start_threads(threads, workspace)
    body += _pack_weights(graph, regions, layout, total)
    what = [
        *(["starts the instance's thread pool"] if workspace is not None else []),
        *(["packs the constant GEMM/conv operands once"] if total else []),
    ]
    doc = [
        "/* Intermediates and workspaces live in env->scratch: create checks that the planned",
        " * workspaces cover what the kernel library asks for"
        + (f",\n * then {' and '.join(what)} (env->state). */" if what else ". */"),
    ]
    destroy = [
        "    c_instance *const instance = (c_instance *)env->state;",
        "    if (instance == NULL)",
        "        return;",
        "    bg_threadpool_destroy(instance->pool);",
        "    free(instance->packed);",
        "    free(instance);",
        "    env->state = NULL;",
    ]
    return [
        *doc,
        f"int BG_EXPORT({model}__c_create)(bg_env *env)",
        "{",
        *(body or ["    (void)env;"]),
        "    return 0;",
        "}",
        "",
        f"void BG_EXPORT({model}__c_destroy)(bg_env *env)",
        "{",
        *(destroy if has_instance else ["    (void)env;"]),
        "}",
    ]


def threads_text(threads: int) -> str:
    setting = "every CPU" if threads == 0 else str(threads)
    return f"{setting} (BUILDGEN_NUM_THREADS overrides)"
