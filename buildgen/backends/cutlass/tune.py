"""Profile CUTLASS candidates on a GPU and write tuning records the codegen reads.

For each distinct GEMM or convolution of the models (by record key), every candidate the
target's attributes allow (choose.candidates: `sm`, `use_3xtf32`, `profile_all_alignments`
widening the alignments; times each `split_k_slices` factor) becomes a small profiler
program: the candidate's launcher (the same text a kernel shard holds) and a main() that
times it with CUDA events on zero-filled buffers of the problem's sizes. The programs are
compiled (nvcc; in parallel processes with `use_multiprocessing`, in `tmp_dir` or the
build's tune folder), then run one at a time so a compile never disturbs a timing. With
`find_first_valid` a problem stops at its first candidate that runs. Records go through
buildgen.partition.cost.records, the file a manifest names as `partition: {records: ...}`;
the cutlass codegen then picks the fastest recorded candidate (choose.choose).

Compiling and measuring are parameters, so the records logic is tested without a GPU.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from buildgen.backends.cutlass.choose import (
    Problem,
    Settings,
    candidates,
    conv_problem,
    gemm_problem,
    record_key,
    settings_of,
    split_factors,
)
from buildgen.backends.cutlass.kernels import ERROR_HELPER, Instantiation, headers, render
from buildgen.backends.cutlass.lower import Call, ConvCall, GemmCall
from buildgen.partition.cost.keys import key_text
from buildgen.partition.cost.records import Record, Records
from buildgen.partition.tune.programs import ProgramRunner, run_here

if TYPE_CHECKING:
    from buildgen.ir import Graph
    from buildgen.partition.cli_support import Loaded
    from buildgen.partition.model import Partition
    from buildgen.targets import ResolvedTarget

ITERATIONS = 20


@dataclass(frozen=True)
class Job:
    """One candidate of one problem: what a profiler program times."""

    call: GemmCall | ConvCall
    problem: Problem
    kernel: Instantiation
    split_k: int
    key: str  # canonical record key text

    @property
    def name(self) -> str:
        digest = hashlib.sha256(self.key.encode()).hexdigest()[:10]
        return f"{self.kernel.symbol}_s{self.split_k}_{digest}"


@dataclass(frozen=True)
class RunOptions:
    """The cutlass attributes that change how tuning runs, never what it finds."""

    use_multiprocessing: bool
    tmp_dir: Path
    jobs: int = os.cpu_count() or 1


def run_options(options: Mapping[str, Any], build_dir: Path) -> RunOptions:
    tmp = options.get("tmp_dir")
    return RunOptions(bool(options.get("use_multiprocessing", True)),
                      Path(tmp) if tmp else build_dir / "tune" / "cutlass")


# compile(job, folder) -> program path; measure(job, program) -> seconds, None: cannot run
Compile = Callable[[Job, Path], Path]
Measure = Callable[[Job, Path], float | None]


def jobs_for(calls: Iterable[Call], settings: Settings) -> list[list[Job]]:
    """Per distinct problem, its candidates in the order choose() considers them."""
    seen: dict[str, list[Job]] = {}
    for call in calls:
        if isinstance(call, GemmCall):
            problem = gemm_problem(call)
        elif isinstance(call, ConvCall):
            problem = conv_problem(call)
        else:
            continue
        pkey = key_text(problem.key())
        if pkey in seen:
            continue
        seen[pkey] = [
            Job(call, problem, kernel, split,
                key_text(record_key(problem, kernel, split, settings.sm)))
            for kernel in candidates(problem, settings)
            for split in split_factors(problem, settings)
        ]
    return [seen[k] for k in sorted(seen)]


def _pending(jobs: Sequence[Job], records: Records, settings: Settings, retune: bool
             ) -> list[Job]:
    """The candidates of one problem still to profile. With find_first_valid a problem with
    any record is done: the first candidate that ran is all it looks for."""
    if retune:
        return list(jobs)
    if settings.find_first_valid and any(j.key in records.by_key for j in jobs):
        return []
    return [j for j in jobs if j.key not in records.by_key]


def profile(
    problems: Sequence[Sequence[Job]], settings: Settings, options: RunOptions,
    records: Records, machine: str, compile_: Compile, measure: Measure, *,
    retune: bool = False,
) -> Records:
    """`records` with the measured candidates added (those already recorded are skipped
    unless `retune`)."""
    todo = [_pending(jobs, records, settings, retune) for jobs in problems]
    flat = [j for jobs in todo for j in jobs]
    options.tmp_dir.mkdir(parents=True, exist_ok=True)
    folders = [options.tmp_dir for _ in flat]
    if options.use_multiprocessing and len(flat) > 1:
        with ProcessPoolExecutor(max_workers=max(1, options.jobs)) as pool:
            programs = list(pool.map(compile_, flat, folders))
    else:
        programs = [compile_(j, f) for j, f in zip(flat, folders, strict=True)]
    built = dict(zip((j.key for j in flat), programs, strict=True))
    new: list[Record] = []
    for jobs in todo:
        for job in jobs:
            seconds = measure(job, built[job.key])
            if seconds is None:
                continue
            new.append(Record(job.key, seconds, ITERATIONS, machine))
            if settings.find_first_valid:
                break
    return records.merged(new)


_GEMM_MAIN = """
int main(void)
{{
    float *a, *b, *c, *d; void *ws;
    cudaMalloc((void **)&a, {size_a} * 4); cudaMalloc((void **)&b, {size_b} * 4);
    cudaMalloc((void **)&c, {size_d} * 4); cudaMalloc((void **)&d, {size_d} * 4);
    cudaMalloc(&ws, {workspace});
    cudaMemset(a, 0, {size_a} * 4); cudaMemset(b, 0, {size_b} * 4); cudaMemset(c, 0, {size_d} * 4);
    bg_cutlass_gemm_args g;
    memset(&g, 0, sizeof g);
    g.m = {m}; g.n = {n}; g.k = {k}; g.batch = {batch}; g.split_k = {split};
    g.alpha = 1.0f; g.beta = 1.0f; g.a = a; g.b = b; g.c = c; g.d = d;
    g.lda = {lda}; g.ldb = {ldb}; g.ldc = {n}; g.ldd = {n};
    g.stride_a = {m} * {k}; g.stride_b = {k} * {n}; g.stride_c = {m} * {n}; g.stride_d = {m} * {n};
    g.workspace = ws; g.workspace_bytes = {workspace};
#define BG_LAUNCH() {symbol}(&g, stream, error, sizeof error)
{timing}
"""

_CONV_MAIN = """
int main(void)
{{
    float *x, *w, *bias, *y; void *ws;
    cudaMalloc((void **)&x, {size_x} * 4); cudaMalloc((void **)&w, {size_w} * 4);
    cudaMalloc((void **)&bias, {k} * 4); cudaMalloc((void **)&y, {size_y} * 4);
    cudaMalloc(&ws, {workspace});
    cudaMemset(x, 0, {size_x} * 4); cudaMemset(w, 0, {size_w} * 4); cudaMemset(bias, 0, {k} * 4);
    bg_cutlass_conv2d_args g;
    memset(&g, 0, sizeof g);
    g.n = {n}; g.h = {h}; g.w = {w_in}; g.c = {c}; g.k = {k}; g.r = {r}; g.s = {s};
    g.p = {p}; g.q = {q}; g.pad_h = {pad_h}; g.pad_w = {pad_w};
    g.stride_h = {stride_h}; g.stride_w = {stride_w};
    g.dilation_h = {dil_h}; g.dilation_w = {dil_w};
    g.alpha = 1.0f; g.beta = 1.0f; g.x = x; g.filter = w; g.bias = bias; g.y = y;
    g.workspace = ws; g.workspace_bytes = {workspace};
#define BG_LAUNCH() {symbol}(&g, stream, error, sizeof error)
{timing}
"""

_TIMING = """    char error[512];
    cudaStream_t stream; cudaStreamCreate(&stream);
    if (BG_LAUNCH()) { printf("invalid %s\\n", error); return 2; }
    if (cudaStreamSynchronize(stream) != cudaSuccess) { printf("invalid run\\n"); return 2; }
    cudaEvent_t start, stop; cudaEventCreate(&start); cudaEventCreate(&stop);
    cudaEventRecord(start, stream);
    for (int i = 0; i < ITERATIONS; ++i) BG_LAUNCH();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0; cudaEventElapsedTime(&ms, start, stop);
    printf("seconds %.9g\\n", ms / 1e3 / ITERATIONS);
    return 0;
}
"""

WORKSPACE = 64 << 20  # split-K semaphores and conv workspaces fit with room to spare


def profiler_source(job: Job) -> str:
    """A standalone program timing one candidate on its problem."""
    head = ["#include <stdio.h>", "#include <string.h>", '#include "bg_cutlass.h"',
            *(f'#include "{h}"' for h in headers([job.kernel])),
            f"#define ITERATIONS {ITERATIONS}", ERROR_HELPER, render(job.kernel)]
    call = job.call
    timing = _TIMING
    if isinstance(call, GemmCall):
        main = _GEMM_MAIN.format(
            size_a=call.batch * call.m * call.k, size_b=call.batch * call.k * call.n,
            size_d=call.batch * call.m * call.n, workspace=WORKSPACE, m=call.m, n=call.n,
            k=call.k, batch=call.batch, split=job.split_k, symbol=job.kernel.symbol,
            lda=call.m if call.trans_a else call.k, ldb=call.k if call.trans_b else call.n,
            timing=timing)
    else:
        main = _CONV_MAIN.format(
            size_x=call.n * call.h * call.w_in * call.c,
            size_w=call.k * call.r * call.s * call.c, size_y=call.n * call.p * call.q * call.k,
            workspace=WORKSPACE, n=call.n, h=call.h, w_in=call.w_in, c=call.c, k=call.k,
            r=call.r, s=call.s, p=call.p, q=call.q, pad_h=call.pads[0], pad_w=call.pads[1],
            stride_h=call.strides[0], stride_w=call.strides[1], dil_h=call.dilations[0],
            dil_w=call.dilations[1], symbol=job.kernel.symbol, timing=timing)
    return "\n".join(head) + main


@dataclass(frozen=True)
class Compiler:
    """nvcc with the cutlass target's flags (a picklable compile function)."""

    nvcc: str
    flags: tuple[str, ...]
    include_dir: str  # buildgen's headers (bg_cutlass.h)

    def __call__(self, job: Job, folder: Path) -> Path:
        source = folder / f"{job.name}.cu"
        program = folder / job.name
        source.write_text(profiler_source(job))
        subprocess.run([self.nvcc, *self.flags, f"-I{self.include_dir}", str(source),
                        "-o", str(program)], check=True, capture_output=True, text=True)
        return program


def run_profiler(job: Job, program: Path, run: ProgramRunner = run_here) -> float | None:
    done = run(program)
    for line in done.stdout.splitlines():
        if line.startswith("seconds "):
            return float(line.split()[1])
    return None  # "invalid ...": the candidate cannot run this problem


def cutlass_jobs(graph: Graph, partition: Partition, target: ResolvedTarget
                 ) -> list[list[Job]]:
    """The profiling jobs of one model's cutlass calls, per distinct problem."""
    from buildgen.backends.cutlass.lower import lower_region

    settings = settings_of(target.instance("cutlass").as_dict())
    calls = [c for r in partition.regions_for("cutlass") for c in lower_region(graph, r.nodes)]
    return jobs_for(calls, settings)


def tune_target(
    graph: Graph, partition: Partition, target: ResolvedTarget, records: Records,
    build_dir: Path, machine: str, *, retune: bool = False, run: ProgramRunner = run_here,
) -> Records:
    """Profile every cutlass call of one model's partition on the GPU `run` runs on."""
    from buildgen.resources import include_dir

    options = target.instance("cutlass").as_dict()
    toolchain = target.toolchain("cutlass")
    compiler = Compiler(toolchain.cc, toolchain.cflags, str(include_dir()))
    return profile(cutlass_jobs(graph, partition, target), settings_of(options),
                   run_options(options, build_dir), records, machine, compiler,
                   functools.partial(run_profiler, run=run), retune=retune)


class CutlassTuner:
    """`buildgen tune --backend cutlass` (buildgen.partition.tune.backend_cli)."""

    def pending(self, loaded: Loaded, records: Records, build_dir: Path) -> tuple[int, int]:
        assert loaded.partition is not None
        problems = cutlass_jobs(loaded.graph, loaded.partition, loaded.target)
        settings = settings_of(loaded.target.instance("cutlass").as_dict())
        return len(problems), sum(len(_pending(jobs, records, settings, False))
                                  for jobs in problems)

    def tune(self, loaded: Loaded, records: Records, build_dir: Path, machine: str, *,
             retune: bool, run: ProgramRunner = run_here) -> Records:
        assert loaded.partition is not None
        return tune_target(loaded.graph, loaded.partition, loaded.target, records, build_dir,
                           machine, retune=retune, run=run)
