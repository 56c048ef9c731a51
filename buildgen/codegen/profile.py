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

`buildgen profile` reads them through the run driver; an application can too. Without
`profile`, none of this is generated and the run has no clock reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from buildgen.partition.model import Partition

if TYPE_CHECKING:
    from buildgen.targets import ResolvedTarget

# Seconds from a CLOCK_MONOTONIC reading: model.c defines _POSIX_C_SOURCE for clock_gettime.
_CLOCK = """\
static uint64_t profile_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
"""


def timed(target: ResolvedTarget) -> bool:
    """Whether the target's executor times its regions (the host's `profile`)."""
    return bool(dict(target.instance(target.host_kind).attrs).get("profile"))


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


def functions(model: str, partition: Partition) -> list[str]:
    # Region ids (r0, r1...) and backend kinds are identifiers: safe in a C string as is.
    labels = ", ".join(f'"{r.id} {r.target}"' for r in partition.regions) or '""'
    count = len(partition.regions)
    return [
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
        "    if (!m) return;",
        "    memset(m->profile_ns, 0, sizeof m->profile_ns);",
        "    m->profile_runs = 0;",
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
    ]
