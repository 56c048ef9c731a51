"""`buildgen profile MODEL [--target T] [--runs N] [--inputs in.npz] [--trace FILE]`: where
one run of a model's library spends its time, region by region.

The target must be built with `profile: true` on its host (the executor then times every
region: codegen/profile.py). The library is brought up to date and run through the same
driver as `buildgen run`: one warm-up run, then N timed ones. Printed: one row per region
in run order (backend, nodes, the ops it holds, mean time per run, share), the time per
backend, and the time outside every region (boundary copies, the executor); then the
slowest kernels of the modules that time theirs (the c host's: each kernel with the ONNX
nodes it runs; oneDNN's: each step with the primitive and the kernel oneDNN picked).
Written: a Chrome trace of one mean run (chrome://tracing, ui.perfetto.dev), regions laid
end to end, each region's kernels inside it in run order.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import BuildgenError, Diagnostic

if TYPE_CHECKING:
    from buildgen.ir import Graph
    from buildgen.partition.model import Region

TRACE = "profile.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from buildgen.run.cli import add_input_arguments

    add_input_arguments(parser)
    parser.add_argument("--runs", type=int, default=20, metavar="N",
                        help="timed runs after one warm-up (default: 20)")
    parser.add_argument("--top", type=int, default=15, metavar="N",
                        help="kernels listed, slowest first (default: 15; 0: every kernel, "
                        "in run order)")
    parser.add_argument("--trace", type=Path, metavar="FILE",
                        help=f"where to write the Chrome trace (default: {TRACE} beside the "
                        "library)")


@dataclass(frozen=True)
class KernelTime:
    region: str  # its region's id
    label: str  # "k3_conv_relu: Conv 'c1', Relu 'r1' -> [1,16,32,32]"
    seconds: float  # per run


@dataclass(frozen=True)
class RegionTime:
    region: Region
    seconds: float  # per run
    ops: str  # "Conv x3, Relu x3"
    kernels: tuple[KernelTime, ...] = ()  # in run order; empty where its module times none


def run(args: argparse.Namespace) -> int:
    from buildgen.partition.serialize import load_partition
    from buildgen.run.cli import prepare

    if args.runs < 1:
        raise BuildgenError(f"--runs must be at least 1, got {args.runs}")
    if args.top < 0:
        raise BuildgenError(f"--top must be 0 (every kernel) or more, got {args.top}")
    prepared = prepare(args)
    label = prepared.pair.files.label
    if not prepared.target.profiled:
        raise BuildgenError(Diagnostic(
            f"{label}: the target is not built with profile: true, so its library does "
            "not time its regions",
            hint="set `profile: true` on the target's host, e.g. `{kind: c, profile: true}`"
            " or `{kind: composite, host: {kind: c, profile: true}, accelerators: [...]}`;"
            " it is a build option like any other (its own build, its own cache keys)"))
    partition = load_partition(prepared.build_dir / prepared.pair.files.partition)
    ran, _ = prepared.execute(args.runs)
    if len(ran.regions) != len(partition.regions):
        raise BuildgenError(f"{label}: the library timed {len(ran.regions)} regions, its "
                            f"partition has {len(partition.regions)}; rebuild it")
    kernels = [KernelTime(region, rest, seconds / ran.runs)
               for (region, _, rest), seconds in ((label.partition(" "), seconds)
                                                  for label, seconds in ran.kernels)]
    times = [RegionTime(r, s / ran.runs, _ops(prepared.graph, r),
                        tuple(k for k in kernels if k.region == r.id))
             for r, s in zip(partition.regions, ran.regions, strict=True)]
    total = ran.seconds / ran.runs
    how = f" under {' '.join(prepared.prefix)} (emulated time)" if prepared.prefix else ""
    print(f"{label}: {ran.runs} runs after a warm-up, {total * 1e3:.3f} ms each{how}; "
          f"inputs {prepared.origin}")
    print(_table(times, total))
    if kernels:
        print()
        print(_kernel_table(kernels, total, args.top))
    trace = args.trace or prepared.build_dir / prepared.pair.files.model / \
        prepared.pair.files.target / TRACE
    _write_trace(trace, times, total, label)
    print(f"wrote {trace}")
    return 0


def _ops(graph: Graph, region: Region) -> str:
    counts = Counter(graph.node(n).op for n in region.nodes)
    shown = [f"{op} x{k}" if k > 1 else op for op, k in counts.most_common(4)]
    return ", ".join(shown) + (", ..." if len(counts) > 4 else "")


def _table(times: list[RegionTime], total: float) -> str:
    rows = [("region", "backend", "nodes", "ms/run", "share", "ops")]
    for t in times:
        rows.append((t.region.id, t.region.target, str(len(t.region.nodes)),
                     f"{t.seconds * 1e3:.3f}", _share(t.seconds, total), t.ops))
    by_backend: dict[str, float] = {}
    for t in times:
        by_backend[t.region.target] = by_backend.get(t.region.target, 0.0) + t.seconds
    outside = max(total - sum(by_backend.values()), 0.0)
    rows.append(("", "", "", "", "", ""))
    for backend, seconds in sorted(by_backend.items(), key=lambda kv: -kv[1]):
        count = sum(1 for t in times if t.region.target == backend)
        rows.append(("all", backend, f"{count} reg.", f"{seconds * 1e3:.3f}",
                     _share(seconds, total), ""))
    rows.append(("outside", "executor", "", f"{outside * 1e3:.3f}", _share(outside, total),
                 "boundary copies, calls"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = []
    for row in rows:
        cells = [row[i].ljust(widths[i]) if i < 2 else row[i].rjust(widths[i]) for i in range(5)]
        lines.append(("  ".join(cells) + "  " + row[5]).rstrip())
    return "\n".join(lines)


def _kernel_table(kernels: list[KernelTime], total: float, top: int) -> str:
    shown = sorted(kernels, key=lambda k: -k.seconds)[:top] if top > 0 else kernels
    order = "slowest first" if top > 0 else "in run order"
    rows = [(f"{k.seconds * 1e3:.3f}", _share(k.seconds, total), k.region, k.label)
            for k in shown]
    widths = [max(len(r[i]) for r in [("ms/run", "share", "region", ""), *rows])
              for i in range(3)]
    head = f"kernels, {order} ({len(shown)} of {len(kernels)}; --top N for more):"
    lines = [head, "  ".join(["ms/run".rjust(widths[0]), "share".rjust(widths[1]),
                              "region".ljust(widths[2]), "kernel"])]
    lines += ["  ".join([r[0].rjust(widths[0]), r[1].rjust(widths[1]), r[2].ljust(widths[2]),
                         r[3]]) for r in rows]
    return "\n".join(lines)


def _share(seconds: float, total: float) -> str:
    return f"{100 * seconds / total:.1f}%" if total > 0 else "-"


def _write_trace(path: Path, times: list[RegionTime], total: float, label: str) -> None:
    """Chrome's trace-event format: complete events ("X") in microseconds, one mean run."""
    from buildgen.fsutil import write_atomic

    events: list[dict[str, object]] = [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": label}}]
    at = 0.0
    for t in times:
        events.append({
            "name": f"{t.region.id} {t.region.target}", "cat": t.region.target, "ph": "X",
            "pid": 1, "tid": 1, "ts": round(at * 1e6, 3), "dur": round(t.seconds * 1e6, 3),
            "args": {"nodes": list(t.region.nodes), "ops": t.ops},
        })
        inside = at
        for k in t.kernels:  # nested in their region's span: the same thread, within it
            name, _, what = k.label.partition(": ")
            events.append({
                "name": name, "cat": "kernel", "ph": "X", "pid": 1, "tid": 1,
                "ts": round(inside * 1e6, 3), "dur": round(k.seconds * 1e6, 3),
                "args": {"region": k.region, "runs": what},
            })
            inside += k.seconds
        at += t.seconds
    events.append({"name": "run", "cat": "run", "ph": "X", "pid": 1, "tid": 0, "ts": 0,
                   "dur": round(total * 1e6, 3), "args": {}})
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"traceEvents": events, "displayTimeUnit": "ms"},
                                  indent=1, sort_keys=True) + "\n")
