"""What bench_cpu.py times and checks: buildgen libraries (in a C loop), onnxruntime sessions
and Apache TVM (in a subprocess per thread count), each behind a `median_ms` timer."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
TVM_SCRIPT = BENCH / "tvm_bench.py"
RTOL, ATOL = 1e-3, 1e-4  # atol is relative to the largest reference value when that is > 1
TVM_BUDGET_MS = 3000.0  # per round: untuned TVM can take seconds per call on the big models


def busy_fraction(seconds: float = 0.3) -> float:
    """How busy the CPUs were over `seconds` (0..1), from /proc/stat; 0 where unreadable."""

    def sample() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields), idle

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return 0.0
    spent = total1 - total0
    return 1.0 - (idle1 - idle0) / spent if spent > 0 else 0.0


@dataclass
class IdleGate:
    """Waits, before each timing, until other work leaves the CPUs (up to a total budget):
    multi-thread runtimes that wait at barriers cannot be timed fairly on shared cores."""

    budget_s: float
    threshold: float = 0.15  # busy fraction that counts as idle (the bench itself is asleep)
    waited_s: float = 0.0
    busy_timings: int = 0

    def wait(self) -> None:
        while busy_fraction() > self.threshold:
            if self.waited_s >= self.budget_s:
                self.busy_timings += 1
                return
            time.sleep(1.0)
            self.waited_s += 1.3


class Timed(Protocol):
    def median_ms(self, warmup: int, runs: int) -> float: ...


def compile_timer(out: Path) -> Path:
    exe = out / "bg_timer"
    source = BENCH / "timer.c"
    if not exe.exists() or exe.stat().st_mtime < source.stat().st_mtime:
        subprocess.run(["cc", "-O2", "-std=c11", str(source), "-o", str(exe), "-ldl"],
                       check=True)
    return exe


@dataclass(frozen=True)
class BuildgenTimer:
    timer: Path
    library: Path
    model: str

    def median_ms(self, warmup: int, runs: int) -> float:
        cmd = [str(self.timer), str(self.library), self.model, str(warmup), str(runs)]
        words = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()
        return float(words[words.index("median_us") + 1]) / 1e3


def ort_session(source: Path, threads: int):  # -> onnxruntime.InferenceSession
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])


@dataclass(frozen=True)
class OrtTimer:
    session: object  # onnxruntime.InferenceSession
    feeds: Mapping[str, np.ndarray]

    def median_ms(self, warmup: int, runs: int) -> float:
        run = self.session.run  # type: ignore[attr-defined]
        for _ in range(warmup):
            run(None, dict(self.feeds))
        times = []
        for _ in range(runs):
            start = time.perf_counter_ns()
            run(None, dict(self.feeds))
            times.append((time.perf_counter_ns() - start) / 1e6)
        return statistics.median(times)


def mismatch(ours: Sequence[np.ndarray], theirs: Sequence[np.ndarray]) -> str | None:
    """Why two output lists differ beyond the tolerance, or None."""
    if len(ours) != len(theirs):
        return f"{len(ours)} outputs, onnxruntime has {len(theirs)}"
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        if a.shape != b.shape:
            return f"output {i} has shape {a.shape}, onnxruntime's {b.shape}"
        atol = ATOL * max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
        if not np.allclose(a, b, rtol=RTOL, atol=atol):
            return f"output {i} differs from onnxruntime's by {float(np.max(np.abs(a - b))):.3g}"
    return None


def check_library(library: Path, feeds: Mapping[str, np.ndarray],
                  expected: Sequence[np.ndarray]) -> str | None:
    """Why `library` cannot be timed (not built, or wrong), or None."""
    if not library.exists():
        return "not built"
    sys.path.insert(0, str(REPO))
    from buildgen import runtime

    compiled = runtime.load(library)
    try:
        ours = list(compiled.run(dict(feeds)).values())
    finally:
        compiled.close()
    return mismatch(ours, expected)


@dataclass(frozen=True)
class TvmTimer:
    library: Path
    inputs: Mapping[str, Sequence[int]]
    threads: int
    outputs: Path

    def run(self, runs: int) -> float:
        env = dict(os.environ, TVM_NUM_THREADS=str(self.threads))
        cmd = [sys.executable, str(TVM_SCRIPT), "time", str(self.library),
               json.dumps(dict(self.inputs)), str(runs), str(self.outputs)]
        words = subprocess.run(cmd, env=env, check=True, capture_output=True,
                               text=True).stdout.split()
        return float(words[words.index("median_ms") + 1])

    def median_ms(self, warmup: int, runs: int) -> float:
        estimate = self.run(1)  # the first call is the warm-up, and sizes the run
        return self.run(max(1, min(runs, int(TVM_BUDGET_MS / max(estimate, 1e-3)))))


def tvm_timers(source: Path, inputs: Mapping[str, Sequence[int]], folder: Path,
               thread_counts: Sequence[int], expected: Sequence[np.ndarray],
               notes: list[str], name: str) -> dict[int, TvmTimer]:
    """TVM timers per thread count, or none (with a note) when TVM is missing, cannot
    import or compile the model, or computes something else."""
    folder.mkdir(parents=True, exist_ok=True)
    library = folder / f"{name}.so"
    if not library.exists() or library.stat().st_mtime < source.stat().st_mtime:
        cmd = [sys.executable, str(TVM_SCRIPT), "compile", str(source), str(library),
               json.dumps(dict(inputs))]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            notes.append(f"{name} TVM: not compiled ({last[:200]})")
            return {}
    timers = {n: TvmTimer(library, inputs, n, folder / f"{name}.{n}t.npz") for n in thread_counts}
    first = timers[thread_counts[0]]
    first.run(1)
    saved = np.load(first.outputs)
    feeds = [saved[f"input_{i}"] for i in range(len(inputs))]
    session_outputs = _ort_outputs(source, dict(zip(inputs, feeds, strict=True)))
    problem = mismatch([saved[f"arr_{i}"] for i in range(len(expected))], session_outputs)
    if problem is not None:
        notes.append(f"{name} TVM: {problem}; not timed")
        return {}
    return timers


def _ort_outputs(source: Path, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    return list(ort_session(source, 1).run(None, dict(feeds)))
