"""Remote execution against a local build, in one run (issue: remote execution, bench).

    python bench/bench_remote.py                   # 50 models, 4 workers; ~5 minutes here
    python bench/bench_remote.py --models 12 --markdown

A clean build of --models models (the MLP example at batch sizes 1..N: distinct actions of
a real model's size, each with the default `{kind: c}` target: a compile per ISA level of
its module, plus its model.c and weights.c) twice, each with an empty local cache:

- locally at `-j --local-jobs` (default 2, this machine's cores);
- remotely at `-j --remote-jobs` (default 8) against a BuildGrid started for the run (cold
  action cache: nothing is served from it) with --workers of the tests' workers
  (tests/remote/bot.py), all on this machine (loopback).

The libraries must be the same bytes, or the bench stops. It prints the wall times, the
compile actions' medians from the action journal (the wrapper's time, start to end), the
workers' own time running each command (the bots record it), and from those the overhead
of sending an action: the wrapper's time minus the worker's, per action. The crossover is
an estimate from those, stated with its formula: W workers of one local core's speed
compile the project faster than C local cores when
W > C * (the local compiles' seconds + compiles * median overhead) / the local compiles'
seconds.

Needs BuildGrid and PostgreSQL as the tests do (.ci/run installs them).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "remote"))
from reapi_service import missing_tools, running_service  # noqa: E402 - the tests' service

from buildgen.cache.journal import read_entries  # noqa: E402

MODEL = REPO / "examples" / "models" / "mlp.onnx"


@dataclass(frozen=True)
class Build:
    wall: float
    compiles: dict[str, tuple[str, float]]  # output -> (outcome, seconds)
    libraries: dict[str, bytes]


def write_project(root: Path, models: int) -> None:
    root.mkdir(parents=True)
    entries = {f"mlp{b}": {"source": str(MODEL), "inputs": {"x": [b, 512]}, "targets": ["c"]}
               for b in range(1, models + 1)}
    (root / "BUILD.yaml").write_text(yaml.safe_dump(
        {"buildgen": 1, "models": entries}))


def build(root: Path, jobs: int, **env: str) -> Build:
    full = {k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")}
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full.get("PYTHONPATH")]))
    full.update(BUILDGEN_CACHE_DIR=str(root / "cache"), **env)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "buildgen", "build", "-j", str(jobs)],
                          cwd=root, env=full, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"build in {root} failed:\n{(done.stdout + done.stderr)[-3000:]}")
    folder = root / "build"
    return Build(wall,
                 {e.output: (e.outcome, e.seconds) for e in read_entries(folder)
                  if e.rule == "cc"},
                 {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("lib*.so")})


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--local-jobs", type=int, default=2)
    parser.add_argument("--remote-jobs", type=int, default=8)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    problem = missing_tools()
    if problem:
        raise SystemExit(f"bench_remote: {problem}")
    scratch = Path(tempfile.mkdtemp(prefix="buildgen-bench-remote-"))
    try:
        write_project(scratch / "local", args.models)
        write_project(scratch / "remote", args.models)
        local = build(scratch / "local", args.local_jobs)
        with running_service(scratch / "service", bots=args.workers) as service:
            remote = build(scratch / "remote", args.remote_jobs,
                           BUILDGEN_REMOTE_EXECUTOR=service.address,
                           BUILDGEN_REMOTE_INSTANCE=service.instance)
            records = service.executed()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if remote.libraries != local.libraries:
        raise SystemExit("bench_remote: the remote build's libraries differ from the local "
                         "build's; nothing is reported")
    report(args, local, remote, records)
    return 0


def report(args: argparse.Namespace, local: Build, remote: Build,
           records: list[dict[str, object]]) -> None:
    executed = [s for o, s in remote.compiles.values() if o == "executed"]
    on_worker = {str(r["outputs"][0]): float(r["seconds"])  # type: ignore[index]
                 for r in records if r.get("outputs")}
    overheads = [s - on_worker[out] for out, (o, s) in remote.compiles.items()
                 if o == "executed" and out in on_worker]
    compile_local = median([s for _, s in local.compiles.values()])
    overhead = median(overheads)
    cores = args.local_jobs
    total_local = sum(s for _, s in local.compiles.values())
    count = len(local.compiles)
    crossover = cores * (total_local + count * overhead) / total_local
    rows = [
        ("clean build, wall", f"{local.wall:.1f} s", f"{remote.wall:.1f} s"),
        ("compile actions", f"{len(local.compiles)}",
         f"{len(remote.compiles)} ({len(executed)} on the workers)"),
        ("median compile action (the wrapper's time)", f"{compile_local:.2f} s",
         f"{median(executed):.2f} s"),
        ("median command time on a worker", "", f"{median(list(on_worker.values())):.2f} s"),
        ("median overhead of a remote action", "", f"{overhead:.2f} s"),
    ]
    head = ("", f"local, -j {args.local_jobs}",
            f"remote, {args.workers} workers, -j {args.remote_jobs}")
    print(f"{args.models} models, the same library bytes both ways")
    if args.markdown:
        print("| " + " | ".join(head) + " |\n|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        for row in (head, *rows):
            print(f"{row[0]:<46}{row[1]:>14}  {row[2]}")
    print(f"crossover: W workers of one local core's speed compile faster than {cores} local "
          f"cores when W > {cores} x (local compile seconds + compiles x overhead) / local "
          f"compile seconds = {cores} x ({total_local:.1f} + {count} x {overhead:.2f}) / "
          f"{total_local:.1f} = {crossover:.1f} (with -j at least W). Here the workers share "
          "this machine's cores, so the remote wall time above is no such pool's.")


if __name__ == "__main__":
    raise SystemExit(main())
