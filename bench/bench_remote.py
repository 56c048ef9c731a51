"""Remote execution against a local build, in one run (issue: remote execution, bench).

    python bench/bench_remote.py                   # 50 models, 4 workers; ~5 minutes here
    python bench/bench_remote.py --models 12 --markdown
    python bench/bench_remote.py --model zoo_squeezenet --models 8 --stages

A clean build of --models models twice, each with an empty local cache. The models: the MLP
example at batch sizes 1..N (distinct actions of a small model's size), or with --model
N copies of a corpus model (tests/corpus; each copy's name prefixes its symbols, so each is
a whole model's actions), each with the default `{kind: c}` target: a compile per ISA level
of its module, plus its model.c and weights.c. With --stages the Python stages (import,
partition, codegen, executor, report) run on the workers too (`remote.python`). The builds:

- locally at `-j --local-jobs` (default 2, this machine's cores);
- remotely at `-j --remote-jobs` (default 8) against a BuildGrid started for the run (cold
  action cache: nothing is served from it) with --workers of the tests' workers
  (tests/remote/bot.py), all on this machine (loopback).

The libraries must be the same bytes, or the bench stops. It prints the wall times, the
remote actions' medians from the action journal (the wrapper's time, start to end), the
workers' own time running each command (the bots record it), and from those the overhead
of sending an action: the wrapper's time minus the worker's, per action. The crossover is
an estimate from those, stated with its formula: W workers of one local core's speed
run the project's remote actions faster than C local cores when
W > C * (their local seconds + actions * median overhead) / their local seconds.

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
STAGE_RULES = frozenset({"import", "partition", "codegen", "executor", "report",
                         "shared_kernels"})


@dataclass(frozen=True)
class Build:
    wall: float
    actions: dict[str, tuple[str, str, float]]  # output -> (rule, outcome, seconds)
    libraries: dict[str, bytes]

    def of(self, rules: frozenset[str]) -> dict[str, tuple[str, float]]:
        return {out: (outcome, s) for out, (rule, outcome, s) in self.actions.items()
                if rule in rules}


def models(name: str, count: int) -> dict[str, dict[str, object]]:
    if name == "mlp":
        return {f"mlp{b}": {"source": str(MODEL), "inputs": {"x": [b, 512]}, "targets": ["c"]}
                for b in range(1, count + 1)}
    sys.path.insert(0, str(REPO / "tests" / "corpus"))
    from corpus_models import BY_NAME, manifest_inputs, model_path

    corpus = BY_NAME[name]
    source, inputs = str(model_path(corpus)), manifest_inputs(corpus)
    return {f"{name}_{i}": {"source": source, "inputs": inputs, "targets": ["c"]}
            for i in range(1, count + 1)}


def write_project(root: Path, entries: dict[str, dict[str, object]]) -> None:
    root.mkdir(parents=True)
    (root / "BUILD.yaml").write_text(yaml.safe_dump({"buildgen": 1, "models": entries}))


def build(root: Path, jobs: int, **env: str) -> Build:
    full = {k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")}
    full["BUILDGEN_PREBUILT"] = "off"  # kernels compiled in the build
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
                 {e.output: (e.rule, e.outcome, e.seconds) for e in read_entries(folder)},
                 {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("lib*.so")})


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--model", default="mlp",
                        help="mlp (at batch sizes 1..N) or a corpus model's name (N copies)")
    parser.add_argument("--stages", action="store_true",
                        help="run the Python stages on the workers too")
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
        entries = models(args.model, args.models)
        write_project(scratch / "local", entries)
        write_project(scratch / "remote", entries)
        local = build(scratch / "local", args.local_jobs)
        stages = {"BUILDGEN_REMOTE_PYTHON": sys.executable} if args.stages else {}
        with running_service(scratch / "service", bots=args.workers) as service:
            remote = build(scratch / "remote", args.remote_jobs,
                           BUILDGEN_REMOTE_EXECUTOR=service.address,
                           BUILDGEN_REMOTE_INSTANCE=service.instance, **stages)
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
    on_worker = {str(r["outputs"][0]): float(r["seconds"])  # type: ignore[index]
                 for r in records if r.get("outputs")}
    kinds = [("compile", frozenset({"cc"}))]
    if args.stages:
        kinds.append(("stage", STAGE_RULES))
    rows = [("clean build, wall", f"{local.wall:.1f} s", f"{remote.wall:.1f} s")]
    total_local, count, overheads = 0.0, 0, []
    for name, rules in kinds:
        here, there = local.of(rules), remote.of(rules)
        executed = [s for o, s in there.values() if o == "executed"]
        overhead = [s - on_worker[out] for out, (o, s) in there.items()
                    if o == "executed" and out in on_worker]
        worker = [on_worker[out] for out, (o, _) in there.items() if out in on_worker]
        rows += [
            (f"{name} actions", f"{len(here)}", f"{len(there)} ({len(executed)} on the workers)"),
            (f"median {name} action (the wrapper's time)",
             f"{median([s for _, s in here.values()]):.2f} s", f"{median(executed):.2f} s"),
            (f"median {name} command time on a worker", "", f"{median(worker):.2f} s"),
            (f"median overhead of a remote {name}", "", f"{median(overhead):.2f} s"),
        ]
        total_local += sum(s for _, s in here.values())
        count += len(here)
        overheads += overhead
    cores = args.local_jobs
    overhead = median(overheads)
    crossover = cores * (total_local + count * overhead) / total_local
    head = ("", f"local, -j {args.local_jobs}",
            f"remote, {args.workers} workers, -j {args.remote_jobs}")
    print(f"{args.models} x {args.model}, the same library bytes both ways")
    if args.markdown:
        print("| " + " | ".join(head) + " |\n|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        for row in (head, *rows):
            print(f"{row[0]:<46}{row[1]:>14}  {row[2]}")
    print(f"crossover: W workers of one local core's speed run the remote actions faster than "
          f"{cores} local cores when W > {cores} x (their local seconds + actions x overhead) / "
          f"their local seconds = {cores} x ({total_local:.1f} + {count} x {overhead:.2f}) / "
          f"{total_local:.1f} = {crossover:.1f} (with -j at least W). Here the workers share "
          "this machine's cores, so the remote wall time above is no such pool's.")

if __name__ == "__main__":
    raise SystemExit(main())
