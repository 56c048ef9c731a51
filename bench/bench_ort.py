"""Time the example models compiled by buildgen against onnxruntime, in one run.

    python bench/bench_ort.py                  # builds BUILD.yaml's models, prints a table
    python bench/bench_ort.py --markdown       # the same table as Markdown, for the docs

Each model's library is timed by bench/timer.c (its <model>_run in a C loop: no Python or
ctypes per call) and onnxruntime through its Python API on the same input shapes, once
with intra_op_num_threads=1 and once with every core. Figures are medians of --runs calls
after --warmup calls. Before timing, each library's output is checked against
onnxruntime's, so the table never reports the speed of a wrong answer.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parent.parent
TIMER_SOURCE = Path(__file__).resolve().parent / "timer.c"


@dataclass(frozen=True)
class ModelEntry:
    name: str
    source: Path
    library: Path


@dataclass(frozen=True)
class Row:
    model: str
    buildgen_ms: float
    ort_1t_ms: float
    ort_all_ms: float
    max_abs_diff: float


def library_path(build_dir: Path, model: str, target: str) -> Path:
    return build_dir / model / target / f"lib{model}.so"


def read_manifest(
    manifest: Path, build_dir: Path | None, target: str | None
) -> tuple[Path, list[ModelEntry]]:
    data = yaml.safe_load(manifest.read_text())
    build_dir = build_dir or manifest.parent / data.get("build_dir", "build")
    entries = []
    for name, model in sorted(data.get("models", {}).items()):
        chosen = target or model["targets"][0]
        if chosen not in model["targets"]:
            continue
        source = manifest.parent / model["source"]
        entries.append(ModelEntry(name, source, library_path(build_dir, name, chosen)))
    return build_dir, entries


def build(manifest: Path, build_dir: Path | None) -> None:
    cmd = [sys.executable, "-m", "buildgen", "build", "--manifest", str(manifest)]
    if build_dir is not None:
        cmd += ["--build-dir", str(build_dir)]
    # Ninja's progress goes to stderr so that stdout is only the table (--markdown > file).
    subprocess.run(cmd, cwd=manifest.parent, check=True, stdout=sys.stderr)


def compile_timer(build_dir: Path) -> Path:
    out = build_dir / "bench" / "bg_timer"
    if not out.exists() or out.stat().st_mtime < TIMER_SOURCE.stat().st_mtime:
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = ["cc", "-O2", "-std=c11", str(TIMER_SOURCE), "-o", str(out), "-ldl"]
        subprocess.run(cmd, check=True)
    return out


def time_buildgen(timer: Path, entry: ModelEntry, warmup: int, runs: int) -> float:
    """Median milliseconds of <model>_run, measured in C."""
    cmd = [str(timer), str(entry.library.resolve()), entry.name, str(warmup), str(runs)]
    line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()
    return float(line[line.index("median_us") + 1]) / 1e3


def ort_session(source: Path, threads: int):  # -> onnxruntime.InferenceSession
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads  # 0 = onnxruntime's default: every core
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(source), opts, providers=["CPUExecutionProvider"])


def time_ort(session, feeds: dict[str, np.ndarray], warmup: int, runs: int) -> float:
    """Median milliseconds of session.run (onnxruntime's own Python binding)."""
    for _ in range(warmup):
        session.run(None, feeds)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        session.run(None, feeds)
        times.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(times)


def bench_model(entry: ModelEntry, timer: Path, warmup: int, runs: int) -> Row:
    from buildgen import runtime

    compiled = runtime.load(entry.library)
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in compiled.inputs}
    ours = compiled.run(feeds)
    compiled.close()

    single = ort_session(entry.source, 1)
    names = [o.name for o in single.get_outputs()]
    theirs = dict(zip(names, single.run(None, feeds), strict=True))
    diff = 0.0
    for name, value in ours.items():
        np.testing.assert_allclose(value, theirs[name], rtol=1e-3, atol=1e-4, err_msg=entry.name)
        diff = max(diff, float(np.max(np.abs(value - theirs[name]))))

    return Row(
        model=entry.name,
        buildgen_ms=time_buildgen(timer, entry, warmup, runs),
        ort_1t_ms=time_ort(single, feeds, warmup, runs),
        ort_all_ms=time_ort(ort_session(entry.source, 0), feeds, warmup, runs),
        max_abs_diff=diff,
    )


def format_table(rows: list[Row], markdown: bool) -> str:
    cores = os.cpu_count() or 1
    header = [
        "model",
        "buildgen (ms)",
        "ort 1 thread (ms)",
        "buildgen/ort",
        f"ort {cores} threads (ms)",
        "buildgen/ort",
        "max abs diff",
    ]
    body = [
        [
            r.model,
            f"{r.buildgen_ms:.3f}",
            f"{r.ort_1t_ms:.3f}",
            f"{r.buildgen_ms / r.ort_1t_ms:.2f}",
            f"{r.ort_all_ms:.3f}",
            f"{r.buildgen_ms / r.ort_all_ms:.2f}",
            f"{r.max_abs_diff:.1e}",
        ]
        for r in rows
    ]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    # Left-align the model column, right-align the numbers.
    lines = []
    for row in [header, *body]:
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, default=REPO / "BUILD.yaml")
    parser.add_argument("--build-dir", type=Path, help="default: the manifest's build_dir")
    parser.add_argument("--target", help="manifest target to time (default: each model's first)")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--no-build", action="store_true", help="reuse the libraries already built")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)

    manifest = args.manifest.resolve()
    build_dir = args.build_dir.resolve() if args.build_dir else None
    if not args.no_build:
        build(manifest, build_dir)
    build_dir, entries = read_manifest(manifest, build_dir, args.target)
    missing = [str(e.library) for e in entries if not e.library.exists()]
    if missing:
        print(f"bench: not built: {', '.join(missing)}", file=sys.stderr)
        return 1
    timer = compile_timer(build_dir)
    rows = [bench_model(e, timer, args.warmup, args.runs) for e in entries]
    print(format_table(rows, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
