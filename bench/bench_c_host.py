"""The `c` host as a new user gets it (`{kind: c}`: no march) against onnxruntime, in one run.

    python bench/bench_c_host.py                  # the examples + the corpus CI models
    python bench/bench_c_host.py --markdown       # the table in docs/performance.md
    python bench/bench_c_host.py mlp zoo_resnet50 # some models

Every model is built once, for the default `c` target (one object per ISA level, the best
the CPU runs picked at create), checked against onnxruntime (rtol 1e-3, atol 1e-4), then
timed: buildgen (calls through buildgen.runtime) against onnxruntime, both with 1 thread and
both with every core, in the same process, in alternating rounds (each a ~0.2 s sample of
each of the four; the median sample of each is reported), so that other load on the machine
falls on all four alike. The library is
built with the default `threads: 1`; its every-core instance is created with
BUILDGEN_NUM_THREADS=<cores>, and its outputs must be the same bits as the 1-thread
instance's (the thread pool's promise), or the row says so. Below the table:
the geometric means and the worst model of each ratio, then the single-core GFLOP/s of the
largest GEMM shapes these models run (packed weights, as the generated code calls them)
against the core's FMA peak measured in the same run (bench/kernels_gemm.py), at the width
of the micro-kernel's accumulators (16 lanes at x86-64-v4: twice the 8-lane peak where the
CPU runs 512-bit operations at full rate, as Intel Xeons do; 8 lanes below).
Other processes on the machine skew every column: rerun rather than copy figures.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# numpy's OpenBLAS would start a thread per core that spins after each call it threads,
# on the cores the every-core runs need; nothing timed here uses it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import yaml  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "corpus"))
sys.path.insert(0, str(REPO / "bench"))
from corpus_build import build_all, interleaved_latency, ort_session  # noqa: E402
from corpus_models import BY_NAME, CI, feeds, manifest_inputs, model_path  # noqa: E402

EXAMPLES = yaml.safe_load((REPO / "BUILD.yaml").read_text())["models"]
TARGET = "c"
RTOL, ATOL = 1e-3, 1e-4
# (M, N, K): the encoder's feed-forward layers, ResNet-50's 3x3 convolutions as GEMMs (first
# and last stage), a Linear layer at batch 64. Each in the orientation the generated code
# calls: the first stage's 64 filters by 3136 pixels; the last stage's 7x7 map in the
# transposed form (bg_conv.h), its 49 pixels on the tile's row side and its 512 filters the
# packed B.
BIG_GEMMS = ((128, 1024, 256), (64, 3136, 576), (49, 512, 4608), (64, 1024, 1024))


@dataclass(frozen=True)
class Row:
    model: str
    isa: str
    ours_ms: float
    ort1_ms: float
    oursn_ms: float
    ortn_ms: float
    error: str = ""


def _source_and_inputs(name: str) -> tuple[Path, dict[str, list[int]]]:
    if name in EXAMPLES:
        return REPO / EXAMPLES[name]["source"], EXAMPLES[name]["inputs"]
    return model_path(BY_NAME[name]), manifest_inputs(BY_NAME[name])


def _feeds(name: str, session) -> dict[str, np.ndarray]:
    if name in BY_NAME:
        return feeds(BY_NAME[name])
    rng = np.random.default_rng(0)
    shapes = EXAMPLES[name]["inputs"]
    return {i.name: rng.standard_normal(shapes[i.name]).astype(np.float32)
            for i in session.get_inputs()}


def bench_model(name: str, build: Path, errors: dict[str, str]) -> Row:
    from buildgen import runtime

    source, _ = _source_and_inputs(name)
    library = build / name / TARGET / f"lib{name}.so"
    if not library.is_file():
        return Row(name, "-", 0, 0, 0, 0, errors.get(name, "did not build")[:60])
    one, every = ort_session(source, 1), ort_session(source, os.cpu_count() or 1)
    inputs = _feeds(name, one)
    compiled = runtime.load(library)
    threaded = _load_threaded(library, os.cpu_count() or 1)
    ours, ours_n = compiled.run(inputs), threaded.run(inputs)
    for info, want in zip(compiled.outputs, one.run(None, inputs), strict=True):
        if not np.allclose(ours[info.name], want, rtol=RTOL, atol=ATOL):
            return Row(name, compiled.cpu_isa, 0, 0, 0, 0, f"output {info.name} differs")
        if ours[info.name].tobytes() != ours_n[info.name].tobytes():
            return Row(name, compiled.cpu_isa, 0, 0, 0, 0, f"{info.name}: threads change bits")
    args = [inputs[i.name] for i in compiled.inputs]
    # Each every-core sample follows a 1-thread sample of the same engine, so that neither
    # starts while the other engine's idle workers still spin.
    ours_1, ours_n, ort_1, ort_n = interleaved_latency([
        lambda: compiled(*args), lambda: threaded(*args),
        lambda: one.run(None, inputs), lambda: every.run(None, inputs),
    ])
    row = Row(name, compiled.cpu_isa, 1e3 * ours_1, 1e3 * ort_1, 1e3 * ours_n, 1e3 * ort_n)
    compiled.close()
    threaded.close()
    return row


def _load_threaded(library: Path, threads: int):
    """An instance of `library` on `threads` threads (BUILDGEN_NUM_THREADS, read at create)."""
    from buildgen import runtime

    previous = os.environ.get("BUILDGEN_NUM_THREADS")
    os.environ["BUILDGEN_NUM_THREADS"] = str(threads)
    try:
        return runtime.load(library)
    finally:
        if previous is None:
            del os.environ["BUILDGEN_NUM_THREADS"]
        else:
            os.environ["BUILDGEN_NUM_THREADS"] = previous


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def print_table(rows: list[Row], markdown: bool) -> None:
    threads = os.cpu_count() or 1
    head = ["model", "ISA picked", "buildgen 1 thread ms", "ort 1 thread ms", "buildgen/ort 1",
            f"buildgen {threads} threads ms", f"ort {threads} threads ms",
            f"buildgen/ort {threads}"]
    cells = [
        [r.model, r.isa, r.error or f"{r.ours_ms:.2f}", *(["-"] * 5 if r.error else [
            f"{r.ort1_ms:.2f}", f"{r.ours_ms / r.ort1_ms:.2f}", f"{r.oursn_ms:.2f}",
            f"{r.ortn_ms:.2f}", f"{r.oursn_ms / r.ortn_ms:.2f}"])]
        for r in rows
    ]
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for c in cells:
            print("| " + " | ".join(c) + " |")
    else:
        widths = [max(len(c[i]) for c in [head, *cells]) for i in range(len(head))]
        for c in [head, *cells]:
            print("  ".join(x.ljust(w) for x, w in zip(c, widths, strict=True)))
    timed = [r for r in rows if not r.error]
    if not timed:
        return
    one = [r.ours_ms / r.ort1_ms for r in timed]
    every = [r.oursn_ms / r.ortn_ms for r in timed]
    worst = max(timed, key=lambda r: r.ours_ms / r.ort1_ms)
    print(f"\n{len(timed)} of {len(rows)} models built, matched and timed")
    print(f"buildgen/ort, 1 thread: geomean {_geomean(one):.2f}, worst "
          f"{worst.ours_ms / worst.ort1_ms:.2f} ({worst.model})")
    print(f"buildgen/ort, {threads} threads: geomean {_geomean(every):.2f}, worst "
          f"{max(every):.2f}")


def print_gemms() -> None:
    import kernels_gemm

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        dll = kernels_gemm.build(Path(tmp))
        lanes, peak = kernels_gemm.tile_peak_gflops(dll, 1.0)
        print(f"\nGEMM micro-kernel, one core, {kernels_gemm.LEVEL}: {lanes}-lane FMA peak "
              f"{peak:.1f} GFLOP/s")
        for m, n, k in BIG_GEMMS:
            _, packed, _ = kernels_gemm.measure(dll, m, n, k, 0, 1.0, rng)
            print(f"  {m} x {n} x {k} (packed weights): {packed:.1f} GFLOP/s, "
                  f"{100 * packed / peak:.0f}% of peak")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="example or corpus model names")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--keep", type=Path, help="build here and keep it")
    parser.add_argument("--no-gemm", action="store_true", help="skip the GEMM section")
    args = parser.parse_args()
    names = args.models or [*EXAMPLES, *(m.name for m in CI)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        entries = {}
        for name in names:
            source, inputs = _source_and_inputs(name)
            entries[name] = {"source": str(source), "inputs": inputs, "targets": [TARGET]}
        manifest = folder / "BUILD.yaml"
        manifest.write_text(yaml.safe_dump({"buildgen": 1, "models": entries}))
        _, errors = build_all(manifest, folder / "build")
        rows = [bench_model(name, folder / "build", errors) for name in names]
    print_table(rows, args.markdown)
    if not args.no_gemm:
        print_gemms()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
