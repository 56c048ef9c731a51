"""Time the example models on an NVIDIA GPU per CUDA backend against PyTorch, in one run.

    python bench/bench_cuda.py       # needs a GPU, nvcc, the cuda extra and torch; prints Markdown

One manifest (written into the build folder) builds the three example models for five
targets on the same device (`--arch`, default sm_90): the `cuda` device alone, then with
each library backend (`cublas`, `cudnn`, `cutlass`) and with all three (the composite of
examples/cuda/BUILD.yaml). Before timing, every library's outputs are compared with
onnxruntime's on the CPU (rtol 1e-3, atol 1e-4), so no figure is the speed of a wrong
answer. Each library's `<model>_run` is timed in C (bench/timer.c): host memory in, host
memory out, so a figure includes the input and output copies and the stream sync.

PyTorch runs the same modules (examples/make_models.py, rebuilt from its seeds; their outputs
are compared with onnxruntime's too and the difference printed) on the same GPU, eager and
`torch.compile` in its default mode and with mode="reduce-overhead" (CUDA graphs), float32
without TF32 (buildgen's defaults: cuDNN FMA math, CUTLASS 3xTF32), timed the same way: host
tensor in, `.cpu()` out. A last column times reduce-overhead with input and output kept on
the GPU (CUDA-synchronized), for reference; the ratio compares host-in, host-out figures.
Figures are medians of --runs calls after --warmup calls.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from bench_ort import ModelEntry, compile_timer, library_path, ort_session, time_buildgen

REPO = Path(__file__).resolve().parent.parent
MODELS = {"mlp": ("x", [8, 512]), "cnn": ("image", [1, 3, 32, 32]),
          "encoder": ("x", [1, 128, 256])}
# Target names may not be kind names: "with-<kind>".
TARGETS = {"cuda-only": [], "with-cublas": ["cublas"], "with-cudnn": ["cudnn"],
           "with-cutlass": ["cutlass"], "all": ["cutlass", "cudnn", "cublas"]}


def manifest_text(arch: str, jobs: int, records: Path | None = None) -> str:
    lines = ["buildgen: 1", "build_dir: .", "targets:"]
    for name, accelerators in TARGETS.items():
        kinds = ", ".join(f"{{kind: {k}}}" for k in accelerators)
        lines += [f"  {name}:", "    kind: composite", "    host: {kind: c, opt_level: 3}",
                  f"    device: {{kind: cuda, arch: {arch}, nvcc_jobs: {jobs}}}",
                  f"    accelerators: [{kinds}]"]
    lines.append("models:")
    for model, (name, shape) in MODELS.items():
        source = REPO / "examples" / "models" / f"{model}.onnx"
        lines += [f"  {model}:", f"    source: {source}", f"    inputs: {{{name}: {shape}}}",
                  f"    targets: [{', '.join(TARGETS)}]"]
        if records is not None:
            lines.append(f"    partition: {{records: {records}}}")
    return "\n".join(lines) + "\n"


def build(build_dir: Path, arch: str, records: Path | None) -> Path:
    build_dir.mkdir(parents=True, exist_ok=True)
    manifest = build_dir / "BUILD.yaml"
    manifest.write_text(manifest_text(arch, os.cpu_count() or 1, records))
    cmd = [sys.executable, "-m", "buildgen", "build", "--manifest", str(manifest)]
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    return manifest


def check(entry: ModelEntry, feeds: dict[str, np.ndarray], expected: np.ndarray) -> float:
    """The library's largest absolute difference from onnxruntime (asserted within tol)."""
    from buildgen import runtime

    compiled = runtime.load(entry.library)
    ours = compiled.run(feeds)
    compiled.close()
    value = next(iter(ours.values()))
    np.testing.assert_allclose(value, expected, rtol=1e-3, atol=1e-4, err_msg=str(entry.library))
    return float(np.max(np.abs(value - expected)))


def torch_module(model: str):  # -> torch.nn.Module, in eval mode, as make_models made it
    sys.path.insert(0, str(REPO / "examples"))
    import make_models as mm
    import torch

    if model == "mlp":
        torch.manual_seed(0)
        return mm.Mlp().eval()
    if model == "cnn":
        torch.manual_seed(1)
        cnn = mm.Cnn()
        mm._randomize_batchnorm(cnn, torch.Generator().manual_seed(2))
        return cnn.eval()
    torch.manual_seed(3)
    return mm.EncoderBlock().eval()


def median_ms(call: Callable[[], object], warmup: int, runs: int) -> float:
    for _ in range(warmup):
        call()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        call()
        times.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(times)


def time_torch(model: str, x: np.ndarray, expected: np.ndarray, warmup: int, runs: int
               ) -> tuple[list[float], float]:
    """Milliseconds of eager, torch.compile and torch.compile(mode="reduce-overhead"), host
    tensor in and out, then the last with the tensors on the GPU; and the max abs diff."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    module = torch_module(model).cuda()
    host = torch.from_numpy(x)
    on_device = host.cuda()
    compiled = torch.compile(module)
    # CUDA graphs: one replay per call, no per-op launch from Python.
    graphed = torch.compile(module, mode="reduce-overhead")
    with torch.inference_mode():
        diff = float(np.max(np.abs(module(on_device).cpu().numpy() - expected)))
        times = [median_ms(lambda f=f: f(host.cuda()).cpu(), warmup + 3, runs)
                 for f in (module, compiled, graphed)]

        def device_only() -> None:
            graphed(on_device)
            torch.cuda.synchronize()

        times.append(median_ms(device_only, warmup, runs))
    return times, diff


def bench(build_dir: Path, warmup: int, runs: int) -> list[list[str]]:
    timer = compile_timer(build_dir)
    rows = []
    for model, (name, shape) in MODELS.items():
        source = REPO / "examples" / "models" / f"{model}.onnx"
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        expected = ort_session(source, 1).run(None, {name: x})[0]
        ours = []
        for target in TARGETS:
            entry = ModelEntry(model, source, library_path(build_dir, model, target))
            diff = check(entry, {name: x}, expected)
            ms = time_buildgen(timer, entry, warmup, runs)
            print(f"{model}/{target}: {ms:.3f} ms, max abs diff {diff:.1e} vs onnxruntime",
                  file=sys.stderr)
            ours.append(ms)
        theirs, diff = time_torch(model, x, expected, warmup, runs)
        print(f"{model}/torch: max abs diff {diff:.1e} vs onnxruntime", file=sys.stderr)
        rows.append([model, *(f"{ms:.3f}" for ms in ours + theirs),
                     f"{min(ours) / min(theirs[:3]):.2f}"])
    return rows


def table(rows: list[list[str]]) -> str:
    header = ["model", *(f"{t} (ms)" for t in TARGETS), "torch eager (ms)",
              "torch.compile (ms)", "torch.compile reduce-overhead (ms)",
              "reduce-overhead, tensors on the GPU (ms)", "best buildgen / best torch"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=REPO / "build" / "bench-cuda")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--records", type=Path,
                        help="tuning records the cutlass and cudnn codegens read "
                             "(`buildgen tune --backend cutlass|cudnn` writes them)")
    parser.add_argument("--no-build", action="store_true", help="reuse the libraries built")
    args = parser.parse_args(argv)
    build_dir = args.build_dir.resolve()
    if not args.no_build:
        build(build_dir, args.arch, args.records.resolve() if args.records else None)
    print(table(bench(build_dir, args.warmup, args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
