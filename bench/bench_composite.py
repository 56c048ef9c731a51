"""The composite CPU target on the real-model corpus against onnxruntime and OpenVINO.

    python bench/bench_composite.py                 # the CI corpus, 1 and 2 threads
    python bench/bench_composite.py --threads 1     # one thread count
    python bench/bench_composite.py magika zoo_shufflenet
    python bench/bench_composite.py --markdown      # the table for docs/performance.md

The target is the one a user writes, `{kind: composite, host: {kind: c}, accelerators:
[onednn, openblas]}` with no march, once per thread count (`threads:` on every member).
onnxruntime runs with that many intra-op threads, OpenVINO's CPU plugin with that many
inference threads and the latency hint (`pip install openvino`; without it the column is
"-"). The three run interleaved, a round of each at a time, and each figure is the median of
its rounds, so load that comes and goes hits all three alike. The ratio is buildgen over the
faster of the two peers (issue 15's bar: geomean at most 0.9, no model above 1.1); a model
that does not build or does not match onnxruntime is reported with its error, never timed.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "corpus"))
from corpus_build import build_all, check, library, ort_session, write_manifest  # noqa: E402
from corpus_models import BY_NAME, CI, CorpusModel, feeds, model_path  # noqa: E402

ROUNDS = 15  # interleaved rounds per model and thread count
BLOCK = 4  # timed calls of each runner per round, after one untimed
SETTLE_S = 0.05  # before each block: longer than onnxruntime's threads spin (measured)
BUDGET_S = 8.0  # per model and thread count, all three together, after the warm-up


def composite(threads: int) -> dict[str, object]:
    return {"kind": "composite", "host": {"kind": "c", "threads": threads},
            "accelerators": [{"kind": "onednn", "threads": threads},
                             {"kind": "openblas", "threads": threads}]}


def openvino_runner(path: Path, inputs: dict[str, np.ndarray], threads: int
                    ) -> Callable[[], object] | None:
    try:
        import openvino as ov
    except ImportError:
        return None
    core = ov.Core()
    try:
        compiled = core.compile_model(str(path), "CPU", {
            "INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": "f32"})
    except RuntimeError as exc:  # a model OpenVINO's ONNX frontend does not convert
        reason = next((line.strip() for line in str(exc).splitlines()
                       if line.strip().startswith("-- ")), str(exc).splitlines()[0])
        OPENVINO_FAILURES[path.name] = reason
        return None
    request = compiled.create_infer_request()
    return lambda: request.infer(inputs)


# model file -> why OpenVINO did not run it (listed under the table; the row compares
# against onnxruntime alone)
OPENVINO_FAILURES: dict[str, str] = {}


def interleaved(runners: list[Callable[[], object] | None]) -> list[float | None]:
    """Median seconds per call of each runner, measured a block of calls of each at a time.

    Rounds alternate the runners so that drift on a shared machine hits all of them. Before
    its block a runner waits SETTLE_S and makes one untimed call: the previous runner's
    worker threads may still be spinning. onnxruntime's intra-op pool spins for tens of ms
    after a run (session.intra_op.allow_spinning, on by default, as a user runs it), and
    timing a 2-thread run right after one measured it against a busy core: stop 32 found
    magika at 2 threads taking 14 ms that way, 6.8 ms with the pause (onnxruntime's own
    time changed by 3%); a process that runs one runtime never sees the other's threads.
    """
    live = [r for r in runners if r is not None]
    for run in live:
        run()  # warm-up: first-call allocation, lazy compilation
    times: list[list[float]] = [[] for _ in live]
    deadline = time.perf_counter() + BUDGET_S
    for count in range(ROUNDS):
        if count >= 3 and time.perf_counter() > deadline:
            break
        for run, samples in zip(live, times, strict=True):
            time.sleep(SETTLE_S)  # the other runner's threads stop spinning
            run()
            for _ in range(BLOCK):
                start = time.perf_counter()
                run()
                samples.append(time.perf_counter() - start)
    medians = iter(float(np.median(t)) for t in times)
    return [next(medians) if r is not None else None for r in runners]


def row(model: CorpusModel, threads: int, build_dir: Path, errors: dict[str, str]
        ) -> tuple[list[str], float | None]:
    from buildgen import runtime

    target = f"cpu{threads}"
    path = model_path(model)
    inputs = feeds(model)
    outcome = check(model, target, build_dir, errors)
    if outcome.error is not None:
        return [model.name, str(threads), outcome.error[:60], "-", "-", "-", "-"], None
    compiled = runtime.load(library(build_dir, model.name, target))
    try:
        args = [inputs[i.name] for i in compiled.inputs]
        session = ort_session(path, threads)
        ours, ort_s, ov_s = interleaved([
            lambda: compiled(*args),
            lambda: session.run(None, inputs),
            openvino_runner(path, inputs, threads),
        ])
    finally:
        compiled.close()
    assert ours is not None and ort_s is not None
    best = min(s for s in (ort_s, ov_s) if s is not None)
    cells = [model.name, str(threads), f"{ours * 1e3:.2f}", f"{ort_s * 1e3:.2f}",
             f"{ov_s * 1e3:.2f}" if ov_s is not None else "-", f"{ours / best:.2f}",
             "onnxruntime" if best == ort_s else "openvino"]
    return cells, ours / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="corpus model names (default: the CI set)")
    parser.add_argument("--threads", type=int, action="append",
                        help="thread counts (default: 1 and 2)")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--keep", type=Path, help="build here and keep it")
    args = parser.parse_args()
    chosen = [BY_NAME[n] for n in args.models] if args.models else list(CI)
    counts = args.threads or [1, 2]
    head = ["model", "threads", "buildgen ms", "ort ms", "openvino ms", "/ best", "best"]
    rows: list[list[str]] = []
    ratios: dict[int, list[float]] = {t: [] for t in counts}
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        manifest = write_manifest(chosen, folder, {f"cpu{t}": composite(t) for t in counts})
        _, errors = build_all(manifest, folder / "build")
        for model in chosen:
            for threads in counts:
                cells, ratio = row(model, threads, folder / "build", errors)
                rows.append(cells)
                if ratio is not None:
                    ratios[threads].append(ratio)
    _print(head, rows, args.markdown)
    for threads, values in ratios.items():
        if values:
            geomean = math.exp(sum(math.log(v) for v in values) / len(values))
            above = sum(1 for v in values if v > 1.1)
            print(f"{threads} thread(s): geomean {geomean:.2f} of the faster peer over "
                  f"{len(values)} models; {above} above 1.1 (bar: geomean <= 0.9, none > 1.1)")
    for name, reason in sorted(OPENVINO_FAILURES.items()):
        print(f"OpenVINO did not compile {name}: {reason}")


def _print(head: list[str], rows: list[list[str]], markdown: bool) -> None:
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for cells in rows:
            print("| " + " | ".join(cells) + " |")
        return
    widths = [max(len(c[i]) for c in [head, *rows]) for i in range(len(head))]
    for cells in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))


if __name__ == "__main__":
    main()
