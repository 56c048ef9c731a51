"""Per-region timing in the executor: what a target with `profile: true` builds.

Each region's call in <model>_run is bracketed by a monotonic clock read and its time added
to the instance's counter; a device region is synchronized first so that its time is the
device's, not the launch's. The library then exports five functions (declared in the
header, with <MODEL>_PROFILE_REGIONS giving their count at compile time):

    int         <m>_profile_count(void)              the regions, in run order
    const char *<m>_profile_region(int i)            "r3 onednn": region id and backend
    double      <m>_profile_seconds(const <m>_model *, int i)   summed over the runs
    uint64_t    <m>_profile_runs(const <m>_model *)  runs since create or reset
    void        <m>_profile_reset(<m>_model *)

Modules that time their kernels too (a kind's rules `kernel_times`: the c host, onednn) export
M__<kind>_kernel_times (buildgen_abi.h); the library lists their kernels one module after
another, each label naming its region first:

    int         <m>_profile_kernel_count(const <m>_model *)
    const char *<m>_profile_kernel(const <m>_model *, int i)   "r0 k3_conv_relu: Conv 'c1'..."
    double      <m>_profile_kernel_seconds(const <m>_model *, int i)

and <m>_profile_reset clears their counters as well.

`buildgen profile` reads them through the run driver; an application can too. Without
`profile`, none of this is generated and the run has no clock reads.
"""

from __future__ import annotations

from collections.abc import Sequence

from buildgen.partition.model import Partition

# Seconds from a CLOCK_MONOTONIC reading: model.c defines _POSIX_C_SOURCE for clock_gettime.
_CLOCK = """\
static uint64_t profile_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
"""


def kernel_timers(partition: Partition, timed: bool) -> tuple[str, ...]:
    """The backends whose modules time their kernels (buildgen_abi.h, bg_kernel_times)."""
    from buildgen.targets import get_kind

    return tuple(b for b in partition.backends if timed and get_kind(b).kernel_times)


def module_functions(backend: str, partition: Partition, timed: bool
                     ) -> list[tuple[str, str, str]]:
    """The function a module that times its kernels exports besides its regions: (return
    type, name after M__<backend>_, parameters)."""
    if backend not in kernel_timers(partition, timed):
        return []
    return [("bg_kernel_times", "kernel_times", "const bg_env *env")]


def struct_fields(partition: Partition) -> list[str]:
    return [
        f"    uint64_t profile_ns[{max(len(partition.regions), 1)}]; /* per region, summed */",
        "    uint64_t profile_runs;",
    ]


def includes() -> list[str]:
    return ["#include <stdint.h>", "#include <time.h>"]


def prelude() -> str:
    return _CLOCK


def region_start() -> list[str]:
    return ["        const uint64_t profile_start = profile_now();"]


def region_end(index: int) -> list[str]:
    return [f"        m->profile_ns[{index}] += profile_now() - profile_start;"]


def run_end() -> list[str]:
    return ["    m->profile_runs++;"]


def functions(model: str, partition: Partition, kernel_times: Sequence[str]) -> list[str]:
    """`kernel_times`: a C expression of each kernel-timing module's bg_kernel_times."""
    # Region ids (r0, r1...) and backend kinds are identifiers: safe in a C string as is.
    labels = ", ".join(f'"{r.id} {r.target}"' for r in partition.regions) or '""'
    count = len(partition.regions)
    return [
        *_kernel_functions(model, kernel_times),
        f"static const char *const profile_labels[] = {{{labels}}};",
        "",
        f"int {model}_profile_count(void) {{ return {count}; }}",
        "",
        f"const char *{model}_profile_region(int i) {{",
        f"    return i >= 0 && i < {count} ? profile_labels[i] : NULL;",
        "}",
        "",
        f"double {model}_profile_seconds(const {model}_model *m, int i) {{",
        f"    return m && i >= 0 && i < {count} ? (double)m->profile_ns[i] * 1e-9 : 0.0;",
        "}",
        "",
        f"uint64_t {model}_profile_runs(const {model}_model *m) {{",
        "    return m ? m->profile_runs : 0;",
        "}",
        "",
        f"void {model}_profile_reset({model}_model *m) {{",
        "    bg_kernel_times t;",
        "    int module;",
        "    if (!m) return;",
        "    memset(m->profile_ns, 0, sizeof m->profile_ns);",
        "    m->profile_runs = 0;",
        "    for (module = 0; kernel_module(m, module, &t); ++module)",
        "        if (t.ns) memset(t.ns, 0, (size_t)t.count * sizeof *t.ns);",
        "}",
        "",
    ]


def _kernel_functions(model: str, kernel_times: Sequence[str]) -> list[str]:
    cases = [f"    case {i}: *t = {call}; return 1;" for i, call in enumerate(kernel_times)]
    return [
        "/* The modules that time their kernels, by number: 0 past the last. */",
        f"static int kernel_module(const {model}_model *m, int module, bg_kernel_times *t) {{",
        *(["    switch (module) {", *cases, "    default: return 0;", "    }"]
          if cases else ["    (void)m, (void)module, (void)t;", "    return 0;"]),
        "}",
        "",
        "/* Kernel i of the library: its module's times and its index there, or -1. */",
        f"static int kernel_at(const {model}_model *m, int i, bg_kernel_times *t) {{",
        "    int module;",
        "    if (!m || i < 0) return -1;",
        "    for (module = 0; kernel_module(m, module, t); ++module) {",
        "        if (i < t->count) return i;",
        "        i -= t->count;",
        "    }",
        "    return -1;",
        "}",
        "",
        f"int {model}_profile_kernel_count(const {model}_model *m) {{",
        "    bg_kernel_times t;",
        "    int module, count = 0;",
        "    for (module = 0; m && kernel_module(m, module, &t); ++module) count += t.count;",
        "    return count;",
        "}",
        "",
        f"const char *{model}_profile_kernel(const {model}_model *m, int i) {{",
        "    bg_kernel_times t;",
        "    const int k = kernel_at(m, i, &t);",
        "    return k < 0 ? NULL : t.labels[k];",
        "}",
        "",
        f"double {model}_profile_kernel_seconds(const {model}_model *m, int i) {{",
        "    bg_kernel_times t;",
        "    const int k = kernel_at(m, i, &t);",
        "    return k < 0 || !t.ns ? 0.0 : (double)t.ns[k] * 1e-9;",
        "}",
        "",
    ]


def declarations(model: str, api: str, regions: int) -> list[str]:
    """The header's part; `api`: its export macro."""
    return [
        f"/* Built with profile: true. Time per region of {model}_run, summed over the runs",
        f" * since create or {model}_profile_reset; regions in run order, each named \"r<k>",
        " * <backend>\" (report.md lists their nodes). */",
        f"#define {model.upper()}_PROFILE_REGIONS {regions}",
        f"{api} int {model}_profile_count(void);",
        f"{api} const char *{model}_profile_region(int i);",
        f"{api} double {model}_profile_seconds(const {model}_model *m, int i);",
        f"{api} uint64_t {model}_profile_runs(const {model}_model *m);",
        f"{api} void {model}_profile_reset({model}_model *m);",
        "/* Per kernel, for the modules that time theirs (the c host's): labels name the region",
        " * first (\"r0 k3_conv_relu: Conv 'c1', Relu 'r1' -> [1,16,32,32]\"); seconds are",
        " * summed like the regions'. 0 kernels where no module times its own. */",
        f"{api} int {model}_profile_kernel_count(const {model}_model *m);",
        f"{api} const char *{model}_profile_kernel(const {model}_model *m, int i);",
        f"{api} double {model}_profile_kernel_seconds(const {model}_model *m, int i);",
    ]
