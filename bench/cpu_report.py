"""bench_cpu.py's tables: per thread count, each model's median milliseconds per variant and
peer, and the best buildgen build over onnxruntime at that thread count (below 1: faster)."""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

BUILDGEN = ("c", "c+openblas", "c+onednn", "cost")


@dataclass(frozen=True)
class ModelResult:
    name: str
    medians: Mapping[tuple[str, int], float]  # (column, threads) -> median ms


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_line() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    libs = ", ".join(f"{d} {_version(d)}" for d in (
        "onnxruntime", "onednn-cpu-gomp", "scipy-openblas32", "apache-tvm"))
    return f"{_cpu()}, {os.cpu_count()} cores (load average {load}); {libs}"


def _row(result: ModelResult, threads: int) -> list[str]:
    m = result.medians
    cells = [result.name]
    for column in BUILDGEN:
        if column == "c" and threads != 1:
            continue
        value = m.get((column, threads))
        cells.append(f"{value:.3f}" if value is not None else "n/a")
    ort = m.get(("onnxruntime", threads))
    tvm = m.get(("tvm", threads))
    cells += [f"{ort:.3f}" if ort else "n/a", f"{tvm:.3f}" if tvm else "n/a"]
    ours = {c: m[(c, threads)] for c in BUILDGEN if (c, threads) in m}
    if ours and ort:
        best = min(ours, key=lambda c: ours[c])
        cells.append(f"{ours[best] / ort:.2f} ({best})")
    else:
        cells.append("n/a")
    return cells


def _table(header: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return lines + ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join([r[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(r[1:], widths[1:],
                                                                           strict=True))])
            for r in [header, *rows]]


def render(results: Sequence[ModelResult], thread_counts: Sequence[int], notes: Sequence[str],
           markdown: bool) -> str:
    lines = [f"Machine: {machine_line()}", ""]
    for threads in thread_counts:
        columns = [c for c in BUILDGEN if c != "c" or threads == 1]
        header = ["model", *(f"{c} (ms)" for c in columns), "onnxruntime (ms)",
                  "TVM untuned (ms)", "best buildgen / onnxruntime"]
        title = "1 thread" if threads == 1 else f"{threads} threads"
        lines += [f"{'### ' if markdown else ''}{title}", ""]
        lines += _table(header, [_row(r, threads) for r in results], markdown)
        lines.append("")
    if notes:
        lines += ["Notes:", *(f"- {n}" for n in notes)]
    return "\n".join(lines).rstrip() + "\n"
