"""The composite CPU target built by two commits, timed against each other in one process.

    python bench/bench_ab.py --base 260a8d4 ocr_det_v6 ocr_cls     # base against the checkout
    python bench/bench_ab.py --base HEAD --target c captcha_rec     # the `c` host alone

On a shared 2-vCPU machine a run of bench_composite.py minutes after another moves every
engine by tens of percent; a change's own effect is measured better by loading both
libraries at once and timing them block by block, alternately (the drift falls on both).
The base commit is checked out in a temporary git worktree and builds with its own code.
Prints each model's medians, their ratio and the host regions of each partition.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "corpus"))
from corpus_models import BY_NAME, feeds, manifest_inputs, model_path  # noqa: E402

BLOCK = 5  # timed calls per block
BUDGET_S = 40.0  # per model, after at least MIN_ROUNDS rounds
MIN_ROUNDS = 5


def target_entry(kind: str, threads: int) -> dict[str, object]:
    """The composite CPU target as a user writes it, or its `c` host alone."""
    host = {"kind": "c", "threads": threads}
    if kind == "c":
        return host
    return {"kind": "composite", "host": host, "accelerators": ["onednn", "openblas"]}


def build(code: Path, folder: Path, name: str, target: dict[str, object]) -> Path:
    """The model's library for `target`, built by the buildgen at `code`."""
    model = BY_NAME[name]
    folder.mkdir(parents=True)
    shutil.copy(model_path(model), folder / "m.onnx")
    manifest = {"buildgen": 1, "targets": {"t": target},
                "models": {"m": {"source": "m.onnx", "inputs": manifest_inputs(model),
                                 "targets": ["t"]}}}
    (folder / "BUILD.yaml").write_text(yaml.safe_dump(manifest))
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run([sys.executable, "-m", "buildgen", "build"], cwd=folder, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{name}: the build at {code} failed\n{done.stdout[-3000:]}")
    return folder / "build" / "m" / "t"


def alternate(calls: list[object], args: list[np.ndarray]) -> list[float]:
    """Median seconds per call of each library, timed in alternating blocks."""
    times: list[list[float]] = [[] for _ in calls]
    deadline = time.perf_counter() + BUDGET_S
    for run in calls:
        run(*args)  # type: ignore[operator]
    rounds = 0
    while rounds < MIN_ROUNDS or time.perf_counter() < deadline:
        rounds += 1
        for run, samples in zip(calls, times, strict=True):
            time.sleep(0.02)  # the other library's threads stop spinning
            run(*args)  # type: ignore[operator]
            for _ in range(BLOCK):
                start = time.perf_counter()
                run(*args)  # type: ignore[operator]
                samples.append(time.perf_counter() - start)
    return [float(np.median(t)) for t in times]


def host_regions(built: Path) -> int:
    return (built / "report.md").read_text().count("| c |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--target", choices=("composite", "c"), default="composite",
                        help="the composite CPU target (default) or its `c` host alone")
    parser.add_argument("models", nargs="+", help="corpus model names")
    args = parser.parse_args()
    from buildgen import runtime

    with tempfile.TemporaryDirectory(prefix="buildgen-ab-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(base),
                        args.base], check=True, capture_output=True)
        try:
            print(f"{'model':20s} {'base ms':>9s} {'this ms':>9s}  this / base  host regions")
            for name in args.models:
                target = target_entry(args.target, args.threads)
                built = [build(code, Path(tmp) / label / name, name, target)
                         for code, label in ((base, "base"), (REPO, "this"))]
                libraries = [runtime.load(b / "libm.so") for b in built]
                inputs = feeds(BY_NAME[name])
                ordered = [inputs[i.name] for i in libraries[1].inputs]
                before, after = alternate(list(libraries), ordered)
                for library in libraries:
                    library.close()
                print(f"{name:20s} {before * 1e3:9.2f} {after * 1e3:9.2f}  "
                      f"{after / before:11.3f}  {host_regions(built[0])} -> "
                      f"{host_regions(built[1])}", flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                            str(base)], check=False, capture_output=True)


if __name__ == "__main__":
    main()
