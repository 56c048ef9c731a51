"""Kernel times in a c module built with `profile: true` (buildgen_abi.h, bg_kernel_times).

The executor times regions; inside a c region, this times each kernel call: a monotonic
clock read before and after, the difference added to the instance's counter of that kernel
(c_instance.kernel_ns, one per kernel of the module, zeroed by create's calloc). View
copies between kernels are left out: they count in their region's time only. The module
exports M__c_kernel_times, which gives the labels and the counters; without `profile` none
of this is generated and no clock is read.
"""

from __future__ import annotations

from collections.abc import Sequence

from buildgen.backends.c.cwriter import shape_text
from buildgen.backends.c.kernel import Kernel
from buildgen.backends.c.lower import LoweredRegion
from buildgen.codegen import cnames
from buildgen.ir import Graph

# clock_gettime needs a POSIX feature macro under -std=c11; the module defines _GNU_SOURCE.
CLOCK = """\
/* profile: true: a monotonic clock in nanoseconds, read around every kernel call. */
static uint64_t kernel_clock(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
"""


def kernel_count(regions: Sequence[LoweredRegion]) -> int:
    return sum(len(r.kernel_names) for r in regions)


def counter_field(regions: Sequence[LoweredRegion]) -> str:
    count = max(kernel_count(regions), 1)
    return f"    uint64_t kernel_ns[{count}]; /* profile: true: each kernel's time, summed */"


def label(graph: Graph, lowered: LoweredRegion, step: int, kernel: Kernel) -> str:
    """"r0 k3_conv_relu: Conv 'c1', Relu 'r1' -> [1,16,32,32]", as printable ASCII (node
    names are the model's data: the label travels through C strings and a driver's lines)."""
    nodes = ", ".join(f"{n.op} {n.name!r}" for n in kernel.nodes)
    shape = shape_text(graph.type_of(kernel.outputs[-1]).shape) if kernel.outputs else ""
    text = f"{lowered.region.id} {lowered.kernel_names[step]}: {nodes}"
    return cnames.printable(text, limit=200) + (f" -> {shape}" if shape else "")


def timing(index: int) -> tuple[str, str]:
    """The lines before and after one kernel call that add its time to counter `index`."""
    return ("profile_start = kernel_clock();",
            f"instance->kernel_ns[{index}] += kernel_clock() - profile_start;")


def export(model: str, graph: Graph, regions: Sequence[LoweredRegion]) -> list[str]:
    """The labels, in run order (the order of the counters), and M__c_kernel_times."""
    labels = [
        cnames.c_string(label(graph, lowered, s, step))
        for lowered in regions
        for s, step in enumerate(lowered.steps)
        if isinstance(step, Kernel)
    ]
    return [
        "/* profile: true: every kernel of the module, in run order (buildgen_abi.h). */",
        "static const char *const kernel_labels[] = {",
        *(f"    {text}," for text in labels or ['""']),
        "};",
        "",
        f"bg_kernel_times BG_EXPORT({model}__c_kernel_times)(const bg_env *env)",
        "{",
        "    c_instance *const instance = (c_instance *)env->state;",
        f"    const bg_kernel_times times = {{{len(labels)}, kernel_labels, "
        "instance ? instance->kernel_ns : NULL};",
        "    return times;",
        "}",
        "",
    ]
