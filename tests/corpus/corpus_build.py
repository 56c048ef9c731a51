"""Building corpus models with buildgen and checking them against onnxruntime.

Shared by tests/corpus/test_corpus.py (behaviour: every CI model compiles and matches) and
bench/bench_corpus.py (the table, with latencies). All models go into one manifest and one
keep-going `buildgen build`, so ninja compiles them in parallel and one failure does not
hide the others.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from corpus_models import CorpusModel, feeds, manifest_inputs, model_path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from ninja_errors import first_errors  # noqa: E402 - one parser of ninja's failures

REPO = Path(__file__).resolve().parents[2]
# The two targets every model is built for: the `c` host as a new user gets it (no march),
# and the composite CPU target with the external CPU libraries.
TARGETS: dict[str, dict[str, object] | None] = {
    "c": None,
    "cpu": {"kind": "composite", "host": {"kind": "c"},
            "accelerators": [{"kind": "onednn"}, {"kind": "openblas"}]},
}
# Within this of onnxruntime: relative, with an absolute floor near zero (the bar).
RTOL, ATOL = 1e-4, 1e-5


@dataclass(frozen=True)
class Check:
    model: str
    target: str
    error: str | None  # None: built and matched
    max_abs: float = 0.0
    max_rel: float = 0.0  # largest |ours - theirs| / max(|theirs|, ATOL/RTOL) over outputs


def write_manifest(models: Sequence[CorpusModel], folder: Path,
                   targets: Mapping[str, dict[str, object] | None] = TARGETS) -> Path:
    definitions = {name: spec for name, spec in targets.items() if spec is not None}
    entries = {
        m.name: {"source": str(model_path(m)), "inputs": manifest_inputs(m),
                 "targets": sorted(targets)}
        for m in models
    }
    manifest = folder / "BUILD.yaml"
    manifest.write_text(yaml.safe_dump(
        {"buildgen": 1, "targets": definitions, "models": entries}, sort_keys=True))
    return manifest


def build_all(manifest: Path, build_dir: Path) -> tuple[subprocess.CompletedProcess[str],
                                                        dict[str, str]]:
    """One keep-going build of the shared libraries; (result, model -> first error line)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["BUILDGEN_CACHE"] = "off"  # what is measured is the compiler, not the cache
    data = yaml.safe_load(manifest.read_text())
    libraries = [f"{m}/{t}/lib{m}.so" for m, e in data["models"].items() for t in e["targets"]]
    result = subprocess.run(
        [sys.executable, "-m", "buildgen", "build", "--manifest", str(manifest),
         "--build-dir", str(build_dir), *libraries, "--", "-k", "0"],
        cwd=manifest.parent, env=env, capture_output=True, text=True, check=False)
    return result, first_errors(result.stdout + result.stderr)


def library(build_dir: Path, model: str, target: str) -> Path:
    return build_dir / model / target / f"lib{model}.so"


def ort_session(path: Path, threads: int = 1):  # -> onnxruntime.InferenceSession
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def check(model: CorpusModel, target: str, build_dir: Path, errors: Mapping[str, str],
          ) -> Check:
    from buildgen import runtime

    path = library(build_dir, model.name, target)
    if not path.exists():
        return Check(model.name, target, "build: " + errors.get(model.name, "no library"))
    inputs = feeds(model)
    session = ort_session(model_path(model))
    expected = session.run(None, inputs)
    compiled = runtime.load(path)
    try:
        ours = compiled(*(inputs[i.name] for i in compiled.inputs))
    except runtime.ModelError as exc:
        return Check(model.name, target, f"run: {exc}")
    finally:
        compiled.close()
    return compare(model.name, target, ours, expected)


def compare(model: str, target: str, ours: Sequence[np.ndarray],
            expected: Sequence[np.ndarray]) -> Check:
    worst_abs = worst_rel = 0.0
    problem = None
    for j, (mine, theirs) in enumerate(zip(ours, expected, strict=True)):
        if mine.shape != theirs.shape:
            return Check(model, target, f"output {j}: shape {mine.shape} != {theirs.shape}")
        if theirs.dtype.kind != "f":
            if not np.array_equal(mine, theirs):
                problem = problem or f"output {j}: {np.sum(mine != theirs)} values differ"
            continue
        diff = np.abs(mine.astype(np.float64) - theirs)
        if np.isnan(diff).any() and not np.array_equal(np.isnan(mine), np.isnan(theirs)):
            problem = problem or f"output {j}: NaN where onnxruntime has none"
        diff = np.nan_to_num(diff)
        scale = np.maximum(np.abs(theirs), ATOL / RTOL)
        worst_abs = max(worst_abs, float(diff.max(initial=0.0)))
        worst_rel = max(worst_rel, float((diff / scale).max(initial=0.0)))
        if not np.allclose(mine, theirs, rtol=RTOL, atol=ATOL, equal_nan=True):
            problem = problem or (f"output {j}: max abs error {diff.max():.3g}, "
                                  f"max relative {(diff / scale).max():.3g}")
    return Check(model, target, problem, worst_abs, worst_rel)


def latency(run, repeats: int = 20, budget_s: float = 3.0) -> float:
    """Median seconds per call of `run()`, after one warm-up, within about `budget_s`."""
    run()
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < repeats and (len(times) < 3 or time.perf_counter() < deadline):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def interleaved_latency(runs: Sequence[Callable[[], object]], rounds: int = 15,
                        budget_s: float = 8.0, sample_s: float = 0.2) -> list[float]:
    """Median seconds per call of each of `runs`, timed in alternation: every round times
    each once (a sample of enough calls to last about `sample_s`, after one untimed call),
    so that load from other processes on a shared machine falls on all of them alike
    instead of on whichever was timed while it lasted.

    Samples are long, and follow each other without a pause, for two reasons measured on
    this project's 2-core VM: a runtime's idle workers spin after a run (onnxruntime's for
    about 40 ms), and a multi-threaded run that starts while another engine's workers spin
    shares its cores with them (buildgen's 2-thread ShuffleNet measured 2.5x slower right
    after onnxruntime's 2-thread run); and pausing between samples instead (to let them
    stop) left both engines' 2-thread runs as slow as their 1-thread ones for a while
    after each pause."""
    calls = []
    for run in runs:
        run()
        start = time.perf_counter()
        run()
        calls.append(max(1, int(sample_s / max(time.perf_counter() - start, 1e-7))))
    samples: list[list[float]] = [[] for _ in runs]
    deadline = time.perf_counter() + budget_s
    while len(samples[0]) < rounds and (len(samples[0]) < 3 or time.perf_counter() < deadline):
        for run, n, times in zip(runs, calls, samples, strict=True):
            run()
            start = time.perf_counter()
            for _ in range(n):
                run()
            times.append((time.perf_counter() - start) / n)
    return [float(np.median(times)) for times in samples]
