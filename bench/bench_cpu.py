"""The CPU backends against their peers, in one run: every example model (root BUILD.yaml)
plus a 224x224 ResNet-18 and a BERT-base encoder layer (generated into bench/out/), each
built for c alone, c + openblas, c + onednn and the cost policy (onednn and openblas both
available), timed against onnxruntime and Apache TVM at one thread and at every core.

    python bench/bench_cpu.py                 # build, check, time; prints a table
    python bench/bench_cpu.py --markdown      # the same as Markdown (docs/performance.md)

Each library is checked against onnxruntime before it is timed (a wrong answer is
reported, never timed). Timing: buildgen libraries run in a C loop (bench/timer.c: no
Python per call); onnxruntime through its Python API (its usual use; ~10-20 us of Python
per call, which matters only for the smallest models); TVM through its VM's
time_evaluator. Variants are timed in interleaved rounds and the median of the rounds'
medians is reported, so a burst of load on the machine hits every column alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
import cpu_peers  # noqa: E402
import cpu_report  # noqa: E402
from cpu_models import write_generated  # noqa: E402

OUT = BENCH / "out"
LIBS = ("openblas", "onednn")


@dataclass(frozen=True)
class Model:
    name: str
    source: Path
    inputs: dict[str, list[int]]


@dataclass(frozen=True)
class Variant:
    label: str  # the column: "c", "c+openblas", "c+onednn", "cost"
    threads: int
    model: str  # the manifest's model name (the cost policy's copy is <model>_cost)
    target: str

    def library(self, build_dir: Path) -> Path:
        return build_dir / self.model / self.target / f"lib{self.model}.so"


def has_avx2() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx2 " in flags and " fma " in flags


def targets(thread_counts: list[int]) -> dict[str, dict[str, object]]:
    host: dict[str, object] = {"kind": "c", "opt_level": 3}
    if has_avx2():
        host["march"] = "x86-64-v3"
    out: dict[str, dict[str, object]] = {"host": {"kind": "composite", "host": host}}
    for n in thread_counts:
        for lib in LIBS:
            out[f"{lib}-{n}t"] = {"kind": "composite", "host": host,
                                  "accelerators": [{"kind": lib, "threads": n}]}
        out[f"fast-{n}t"] = {"kind": "composite", "host": host, "accelerators": [
            {"kind": "onednn", "threads": n}, {"kind": "openblas", "threads": n}]}
    return out


def variants(model: str, thread_counts: list[int]) -> list[Variant]:
    found = [Variant("c", 1, model, "host")]
    for n in thread_counts:
        found += [Variant(f"c+{lib}", n, model, f"{lib}-{n}t") for lib in LIBS]
        found.append(Variant("cost", n, f"{model}_cost", f"fast-{n}t"))
    return found


def write_manifest(models: list[Model], thread_counts: list[int], records: Path | None
                   ) -> Path:
    entries: dict[str, object] = {}
    names = list(targets(thread_counts))
    for m in models:
        inputs = {k: list(v) for k, v in m.inputs.items()}
        entries[m.name] = {"source": str(m.source), "inputs": inputs,
                           "targets": [t for t in names if not t.startswith("fast")]}
        cost: dict[str, object] = {"policy": "cost"}
        if records is not None:
            cost["records"] = str(records)
        entries[f"{m.name}_cost"] = {"source": str(m.source), "inputs": inputs,
                                     "targets": [t for t in names if t.startswith("fast")],
                                     "partition": cost}
    manifest = OUT / "BUILD.yaml"
    text = yaml.safe_dump({"buildgen": 1, "build_dir": "build",
                           "targets": targets(thread_counts), "models": entries},
                          sort_keys=True)
    manifest.write_text(text)
    return manifest


def buildgen(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "buildgen", *args], cwd=OUT, env=env,
                          capture_output=True, text=True)


def example_models() -> list[Model]:
    data = yaml.safe_load((REPO / "BUILD.yaml").read_text())
    return [Model(n, REPO / m["source"], dict(m["inputs"])) for n, m in data["models"].items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated subset (default: all)")
    parser.add_argument("--runs", type=int, default=20, help="calls per round per variant")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="the 'every core' thread count (default: all cores)")
    parser.add_argument("--tune", action="store_true",
                        help="run `buildgen tune` so the cost policy uses measured records")
    parser.add_argument("--idle-budget", type=float, default=900,
                        help="seconds the run may wait in all for other work to leave the "
                        "CPUs before a timing (default 900; 0: never wait)")
    parser.add_argument("--no-tvm", action="store_true", help="leave Apache TVM out")
    parser.add_argument("--no-build", action="store_true", help="reuse bench/out/build")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)

    OUT.mkdir(parents=True, exist_ok=True)
    generated = write_generated(OUT / "models")
    models = example_models() + [Model(n, p, i) for n, (p, i) in generated.items()]
    if args.models:
        wanted = args.models.split(",")
        models = [m for m in models if m.name in wanted]
    thread_counts = sorted({1, args.threads})
    records = OUT / "records.json" if args.tune else None
    manifest = write_manifest(models, thread_counts, records)
    notes: list[str] = []
    if not args.no_build:
        if args.tune:
            tuned = buildgen("tune", "--manifest", str(manifest))
            if tuned.returncode != 0:
                notes.append("`buildgen tune` failed; the cost policy used its analytic "
                             "estimates: " + tuned.stderr.strip().splitlines()[-1:][0])
        built = buildgen("build", "--manifest", str(manifest), "--", "-k", "0")
        if built.returncode != 0:
            notes.append("some builds failed: " + (built.stdout + built.stderr)[-600:])
    build_dir = OUT / "build"
    timer = cpu_peers.compile_timer(OUT)
    results = []
    gate = cpu_peers.IdleGate(args.idle_budget)
    for model in models:
        print(f"bench: {model.name}", file=sys.stderr)
        results.append(bench_model(model, build_dir, timer, thread_counts, args, notes, gate))
    if gate.busy_timings:
        # Fork-join runtimes (OpenMP in oneDNN, OpenBLAS's threads) wait at every barrier
        # for a thread the OS gave to another process: their multi-thread figures collapse
        # when the cores are shared; onnxruntime's work-stealing pool degrades far less.
        notes.append(f"{gate.busy_timings} timing(s) ran while other work kept the CPUs busy "
                     f"(after waiting {gate.waited_s:.0f} s for them to go idle): their "
                     "multi-thread figures (OpenMP, OpenBLAS threads) are not representative")
    print(cpu_report.render(results, thread_counts, notes, args.markdown))
    return 0


def bench_model(model: Model, build_dir: Path, timer: Path, thread_counts: list[int],
                args: argparse.Namespace, notes: list[str], gate: cpu_peers.IdleGate
                ) -> cpu_report.ModelResult:
    feeds = {k: np.random.default_rng(0).standard_normal(v).astype(np.float32)
             for k, v in model.inputs.items()}
    ort = {n: cpu_peers.ort_session(model.source, n) for n in thread_counts}
    expected = ort[1].run(None, feeds)
    timed: dict[tuple[str, int], cpu_peers.Timed] = {}
    for v in variants(model.name, thread_counts):
        lib = v.library(build_dir)
        problem = cpu_peers.check_library(lib, feeds, expected)
        if problem is not None:
            notes.append(f"{model.name} {v.label} ({v.threads} thread(s)): {problem}")
            continue
        timed[(v.label, v.threads)] = cpu_peers.BuildgenTimer(timer, lib, v.model)
    for n, session in ort.items():
        timed[("onnxruntime", n)] = cpu_peers.OrtTimer(session, feeds)
    if not args.no_tvm:
        tvm = cpu_peers.tvm_timers(model.source, model.inputs, OUT / "tvm", thread_counts,
                                   expected, notes, model.name)
        timed.update({("tvm", n): t for n, t in tvm.items()})
    samples: dict[tuple[str, int], list[float]] = {k: [] for k in timed}
    for _ in range(args.rounds):
        for key, timer_ in timed.items():
            gate.wait()
            samples[key].append(timer_.median_ms(args.warmup, args.runs))
    medians = {k: statistics.median(v) for k, v in samples.items() if v}
    return cpu_report.ModelResult(model.name, medians)


if __name__ == "__main__":
    sys.exit(main())
