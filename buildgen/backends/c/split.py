"""Kernels whose rows are shared among the model instance's threads (Kernel.split).

A split kernel's body loops over rows [lo, hi) of [0, split), each row independent of the
others (an elementwise loop nest's outermost dimension, ...). It is rendered as four
pieces, so that the body still reads as the one-thread code it is:

    <k>_range   the body, over rows [lo, hi)
    <k>_args    the kernel's arguments, gathered for the tasks, and the rows per task
    <k>_task    one task: one block of rows (bg_threads.h's bg_task_fn)
    <k>         what the region function calls: the rows in blocks of at least
                `split_grain` (bg_split_rows), on the pool, or all on the caller's thread

A row computes the same bits whichever thread runs it and however the rows are blocked
(no reduction crosses rows), so results do not depend on the thread count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from buildgen.backends.c.cwriter import signature
from buildgen.backends.c.kernel import Kernel, Param

# A kernel of at least this many elements shares its rows among the instance's threads, in
# blocks of at least SPLIT_GRAIN_ELEMENTS: smaller ones cost less than waking a thread does.
SPLIT_MIN_ELEMENTS = 32 * 1024
SPLIT_GRAIN_ELEMENTS = 16 * 1024


def split_fields(rows: int, numel: int) -> dict[str, Any]:
    """Kernel(**fields) for a kernel of `numel` elements in `rows` independent rows: the
    split and its grain when it is worth sharing, else nothing (one thread)."""
    if rows < 2 or numel < SPLIT_MIN_ELEMENTS:
        return {}
    return {"split": rows, "split_grain": -(-SPLIT_GRAIN_ELEMENTS * rows // numel)}


def _field(param: Param) -> str:
    """The args struct's member for `param` (the declaration without `restrict`)."""
    return param.declaration().replace(" *restrict ", " *") + ";"


def render_split(name: str, kernel: Kernel, body: Sequence[str]) -> list[str]:
    """The four pieces of split kernel `name`; `body` is its C body over [lo, hi)."""
    assert kernel.split > 0 and kernel.uses_pool and not kernel.fallible
    params = [p for p in kernel.params if not p.pool]
    workspace = next((p.name for p in params if not p.tensor and not p.packed), None)
    rows, grain = kernel.split, kernel.split_grain
    range_params = [p.declaration() for p in params] + ["int64_t lo", "int64_t hi"]
    args = [f"a->{p.name}" if p.name != workspace else "ws" for p in params]
    return [
        *signature("static void", f"{name}_range", range_params),
        "{", *body, "}", "",
        f"typedef struct {name}_args {{",
        *(f"    {_field(p)}" for p in params),
        "    int64_t step; /* rows per task */",
        f"}} {name}_args;",
        "",
        f"static void {name}_task(const void *ctx, int64_t task, void *ws)",
        "{",
        f"    const {name}_args *a = (const {name}_args *)ctx;",
        "    const int64_t lo = task * a->step;",
        *([] if workspace else ["    (void)ws;"]),
        f"    {name}_range({', '.join(args)}, lo, bg__min64(lo + a->step, {rows}));",
        "}",
        "",
        f"/* Rows [0, {rows}) of {name}_range on the instance's threads,",
        f" * in blocks of at least {grain}. */",
        *signature("static void", name, [p.declaration() for p in kernel.params]),
        "{",
        f"    const int64_t step = bg_split_rows({rows}, {grain}, pool);",
        f"    const {name}_args a = {{{', '.join([p.name for p in params] + ['step'])}}};",
        f"    bg_parallel(pool, ({rows} + step - 1) / step, {name}_task, &a, "
        f"{workspace or 'NULL'});",
        "}",
        "",
    ]
