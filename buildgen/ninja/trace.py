"""A build's `.ninja_log` -> a Chrome trace (Trace Event Format), for chrome://tracing or
ui.perfetto.dev. Pure functions: text in, JSON text out.

The log (ninja's src/build_log.cc) starts with `# ninja log v<N>`; every later line is one
output of one finished edge:

    <start ms>\\t<end ms>\\t<mtime>\\t<output path>\\t<command hash, hex>

The line is the same in every version read here; what changed is what the fields mean:
v5 (ninja 1.0 to 1.11) hashes the command with MurmurHash64A and records the output's
restat mtime; v6 (1.12) records the mtime from when the edge started; v7 (1.13) hashes with
rapidhash. Times are milliseconds since that ninja run started. ninja appends one line per
output when an edge finishes (so an edge with three outputs writes three lines with equal
times and hash) and every run appends to the same file, so runs follow one another. A run
ends where finish times go backwards (as ninjatracing splits them) or an output repeats
(an edge runs at most once per run). One limit, shared with ninjatracing: when ninja
recompacts a long log it rewrites it with one line per output in no time order, so the
first build after a recompaction may take in a few older lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from buildgen.errors import BuildgenError
from buildgen.ninja.layout import (
    BUILD_NINJA,
    SHARED_DIR,
    SOURCE_EXTENSIONS,
    TARGETS_DIR,
    ModelFiles,
    TargetFiles,
)

LOG_VERSIONS = (5, 6, 7)
_HEADER = re.compile(r"# ninja log v(\d+)")
_US_PER_MS = 1000


@dataclass(frozen=True)
class LogEntry:
    start_ms: int
    end_ms: int
    output: str
    command_hash: str  # hex, as logged; the algorithm depends on the version


@dataclass(frozen=True)
class NinjaLog:
    version: int
    entries: tuple[LogEntry, ...]  # in file order


@dataclass(frozen=True)
class Job:
    """One edge's run: the outputs it wrote, and when."""

    start_ms: int
    end_ms: int
    outputs: tuple[str, ...]  # in log order: the edge's own order of outputs
    command_hash: str

    @property
    def seconds(self) -> float:
        return (self.end_ms - self.start_ms) / 1e3


def parse_ninja_log(text: str, name: str = ".ninja_log") -> NinjaLog:
    """Read a log of format v5, v6 or v7; `name` is where errors say it came from."""
    lines = text.split("\n")
    header = _HEADER.fullmatch(lines[0].rstrip("\r"))
    if header is None:
        raise BuildgenError(f"{name}:1: not a ninja log: it does not start with '# ninja log v<N>'")
    version = int(header.group(1))
    if version not in LOG_VERSIONS:
        raise BuildgenError(
            f"{name}:1: ninja log format v{version}; buildgen reads "
            + ", ".join(f"v{v}" for v in LOG_VERSIONS)
            + " (ninja 1.0 to 1.13)"
        )
    entries = []
    for number, line in enumerate(lines[1:], start=2):
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        try:
            if len(fields) != 5:
                raise ValueError(f"{len(fields)} tab-separated fields, not 5")
            start, end, _mtime, output, command_hash = fields
            entries.append(LogEntry(int(start), int(end), output, f"{int(command_hash, 16):x}"))
        except ValueError as exc:
            if number == len(lines):
                break  # the last line without its newline: ninja was stopped mid-write
            raise BuildgenError(f"{name}:{number}: malformed log line ({exc})") from None
    return NinjaLog(version, tuple(entries))


def split_builds(entries: Sequence[LogEntry]) -> list[tuple[LogEntry, ...]]:
    """The log's runs of ninja, oldest first (see the module's docstring)."""
    builds: list[list[LogEntry]] = []
    seen: set[str] = set()
    last_end = None
    for entry in entries:
        if last_end is None or entry.end_ms < last_end or entry.output in seen:
            builds.append([])
            seen = set()
        builds[-1].append(entry)
        seen.add(entry.output)
        last_end = entry.end_ms
    return [tuple(b) for b in builds]


def jobs_of(build: Sequence[LogEntry]) -> tuple[Job, ...]:
    """One job per edge: lines with one command hash and the same times are one edge's
    outputs (an edge logs all of its outputs at once)."""
    grouped: dict[tuple[str, int, int], list[str]] = {}
    for entry in build:
        grouped.setdefault((entry.command_hash, entry.start_ms, entry.end_ms), []).append(
            entry.output
        )
    return tuple(
        Job(start, end, tuple(outputs), command_hash)
        for (command_hash, start, end), outputs in grouped.items()
    )


def assign_lanes(jobs: Sequence[Job]) -> dict[Job, int]:
    """A lane (trace thread) per job such that jobs of one lane never overlap. Greedy in
    start order, each job taking the lowest lane free by then: that uses as many lanes as
    the most jobs running at once, which is what ninja's -j allowed."""
    lane_free_at: list[int] = []
    lanes: dict[Job, int] = {}
    for job in sorted(jobs, key=lambda j: (j.start_ms, j.end_ms, j.outputs)):
        free = [i for i, free_at in enumerate(lane_free_at) if free_at <= job.start_ms]
        lane = free[0] if free else len(lane_free_at)
        if lane == len(lane_free_at):
            lane_free_at.append(job.end_ms)
        lane_free_at[lane] = job.end_ms
        lanes[job] = lane
    return lanes


# The buildgen stage that writes an output, and the chrome://tracing colour name for it
# (its reserved `cname` palette). Perfetto colours slices by name instead; there the stage
# is the slice's category.
STAGE_COLOURS = {
    "gen": "grey",
    "import": "rail_load",
    "partition": "rail_animation",
    "codegen": "olive",
    "executor": "yellow",
    "compile": "good",
    "link": "rail_response",
    "report": "startup",
    "other": "generic_work",
}


def stage_of(output: str) -> str:
    """Which stage wrote `output`, from where the layout (layout.py) puts each file."""
    if output == BUILD_NINJA:
        return "gen"
    parts = output.split("/")
    model = ModelFiles(parts[0])
    if len(parts) == 2 and output in (model.graph, model.weights, model.constants):
        return "import"
    if len(parts) < 3:
        return "other"
    if parts[0] == TARGETS_DIR:  # a target's files, written once per target
        return "gen"
    if parts[0] == SHARED_DIR:  # kernels shared by the build's libraries (shared_modules.py)
        suffix = output.rpartition(".")[2]
        return {"o": "compile", "a": "link", "md": "codegen"}.get(suffix, "codegen")
    files = TargetFiles(parts[0], parts[1])
    named = {
        files.partition: "partition",
        files.executor_source: "executor",
        files.weights_asm: "executor",
        files.header: "executor",
        files.shared_lib: "link",
        files.static_lib: "link",
        files.report_json: "report",
        files.report_md: "report",
    }
    if output in named:
        return named[output]
    folder, _, base = output.rpartition("/")
    if folder == files.obj("x").rpartition("/")[0] and base.endswith(".o"):
        return "compile"
    if folder == files.executor_source.rpartition("/")[0]:
        extension = base.rpartition(".")[2]
        # a module, or the list of kernels objects its libraries link (link_kernels)
        if extension in SOURCE_EXTENSIONS.values() or extension in ("dd", "rsp"):
            return "codegen"
    return "other"


def chrome_trace(log: NinjaLog, all_builds: bool = False) -> dict[str, Any]:
    """The Trace Event Format object: one "X" (complete) event per job, one process per
    ninja run (only the last unless `all_builds`), one thread per lane."""
    builds = split_builds(log.entries)
    if not all_builds:
        builds = builds[-1:]
    events: list[dict[str, Any]] = []
    for pid, build in enumerate(builds, start=1):
        label = "ninja" if len(builds) == 1 else f"ninja run {pid} of {len(builds)}"
        events.append(_metadata("process_name", pid, 0, label))
        lanes = assign_lanes(jobs_of(build))
        for lane in sorted(set(lanes.values())):
            events.append(_metadata("thread_name", pid, lane, f"lane {lane}"))
        jobs = sorted(lanes, key=lambda j: (j.start_ms, lanes[j], j.outputs))
        for job in jobs:
            stage = stage_of(job.outputs[0])
            events.append({
                "name": job.outputs[0],
                "cat": stage,
                "cname": STAGE_COLOURS[stage],
                "ph": "X",
                "ts": job.start_ms * _US_PER_MS,
                "dur": (job.end_ms - job.start_ms) * _US_PER_MS,
                "pid": pid,
                "tid": lanes[job],
                "args": {"outputs": list(job.outputs), "command_hash": job.command_hash},
            })
    return {
        "displayTimeUnit": "ms",
        "otherData": {"ninja_log_version": log.version, "runs": len(builds)},
        "traceEvents": events,
    }


def _metadata(kind: str, pid: int, tid: int, name: str) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}


def render_trace(trace: dict[str, Any]) -> str:
    """JSON text, one event per line (readable, diffable), keys sorted: same log, same bytes."""
    head = {k: v for k, v in trace.items() if k != "traceEvents"}
    lines = [json.dumps(e, sort_keys=True) for e in trace["traceEvents"]]
    fields = [f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(head.items())]
    body = ",\n".join(lines)
    fields.append(f'"traceEvents": [\n{body}\n]' if lines else '"traceEvents": []')
    return "{" + ",\n".join(fields) + "}\n"
