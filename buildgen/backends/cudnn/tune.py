"""Time every cuDNN forward algorithm of each distinct convolution on a GPU into tuning records.

`buildgen tune --backend cudnn` lowers each model's cudnn regions as the codegen does, keeps
the distinct convolution problems (buildgen.backends.cudnn.algorithms.ConvProblem) that have
no record yet, and writes one profiler program for all of them: the module's own descriptor
helpers (buildgen.backends.cudnn.runtime) in the target's math mode, then per problem and
per algorithm the call the module makes (the fused bias-activation call or the plain
convolution) on zero-filled buffers, timed with CUDA events. Each algorithm that runs gives
a record with its time and the workspace it took; the codegen then names the fastest that
fits the target's `workspace_limit_mb` (any limit: the profiler allows up to the schema's
maximum). The program is compiled with the cudnn module's nvcc flags and links cuDNN as the
model does.

Compiling and running are parameters, so the records logic is tested without a GPU.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.backends.cudnn.algorithms import ALGORITHMS, ConvProblem, conv_problem, record_key
from buildgen.backends.cudnn.lower import ConvCall
from buildgen.backends.cudnn.module import Settings
from buildgen.backends.cudnn.runtime import CHECK, CONV_DESCRIPTORS, TENSOR_HELPERS
from buildgen.backends.gpu_region import PRELUDE
from buildgen.errors import error
from buildgen.partition.cost.keys import key_text
from buildgen.partition.cost.records import Record, Records
from buildgen.partition.tune.programs import ProgramRunner, run_here

if TYPE_CHECKING:
    from buildgen.partition.cli_support import Loaded

ITERATIONS = 20
MAX_WORKSPACE = 16384 << 20  # workspace_limit_mb's maximum: records serve any limit
CALLS = ("convolution", "bias_relu", "bias_relu_residual")  # ConvProblem.call, as an index


@dataclass(frozen=True)
class Job:
    """One distinct convolution: every algorithm of it is timed by one profiler run."""

    problem: ConvProblem
    sm: int
    math: str  # the module's cudnnMathType_t (Settings.math)

    def key(self, algorithm: str) -> str:
        return key_text(record_key(self.problem, algorithm, self.sm, self.math))


@dataclass(frozen=True)
class Timing:
    """One profiler line: algorithm `algorithm` of problem `index` ran in `seconds`."""

    index: int
    algorithm: str
    seconds: float
    workspace_bytes: int


# compile(jobs, folder) -> program; measure(jobs, program) -> the algorithms that ran
Compile = Callable[[Sequence[Job], Path], Path]
Measure = Callable[[Sequence[Job], Path], list[Timing]]


def jobs_for(calls: Iterable[object], settings: Settings) -> list[Job]:
    """The distinct convolutions among `calls`, sorted by their problem's key."""
    if settings.sm is None:
        raise ValueError("cudnn: the 'sm' attribute is unset and no cuda arch gives it")
    problems = {conv_problem(c) for c in calls if isinstance(c, ConvCall)}
    jobs = [Job(p, settings.sm, settings.math) for p in problems]
    return sorted(jobs, key=lambda j: key_text(j.problem.key()))


def pending(jobs: Sequence[Job], records: Records, retune: bool = False) -> list[Job]:
    """The jobs to run: those with no algorithm recorded (a run records all that ran)."""
    return [j for j in jobs
            if retune or not any(j.key(a) in records.by_key for a in ALGORITHMS)]


def profile(jobs: Sequence[Job], records: Records, machine: str, folder: Path,
            compile_: Compile, measure: Measure, *, retune: bool = False) -> Records:
    """`records` with every algorithm of the pending jobs that ran on this GPU added."""
    todo = pending(jobs, records, retune)
    if not todo:
        return records
    folder.mkdir(parents=True, exist_ok=True)
    timings = measure(todo, compile_(todo, folder))
    return records.merged(
        Record(todo[t.index].key(t.algorithm), t.seconds, ITERATIONS, machine, t.workspace_bytes)
        for t in timings)


_RUN = r"""
/* The call the module makes for problem `pr`, with algorithm `algo`. */
static cudnnStatus_t bg_call(cudnnHandle_t h, const bg_problem *pr, bg_conv *c, bg_buffers *b,
                             cudnnConvolutionFwdAlgo_t algo, void *ws, size_t bytes,
                             cudnnActivationDescriptor_t relu)
{
    const float one = 1.0f, zero = 0.0f;
    if (pr->call == 0)
        return cudnnConvolutionForward(h, &one, c->x, b->x, c->w, b->w, c->conv, algo, ws,
                                       bytes, &zero, c->y, b->y);
    return cudnnConvolutionBiasActivationForward(
        h, &one, c->x, b->x, c->w, b->w, c->conv, algo, ws, bytes,
        pr->call == 2 ? &one : &zero, c->y, pr->call == 2 ? b->z : b->y, c->bias, b->bias,
        relu, c->y, b->y);
}

/* Times every algorithm of problem `index`; prints one line per algorithm. */
static int bg_time(bg_env *env, cudnnHandle_t h, cudaStream_t stream, int index,
                   const bg_problem *pr, cudnnActivationDescriptor_t relu)
{
    const char *where = "problem";
    const bg_conv_spec *sp = &pr->spec;
    bg_conv c;
    memset(&c, 0, sizeof c);
    if (bg_conv_describe(env, &c, sp, where) != 0) return -1;
    const size_t sizes[5] = {
        (size_t)sp->n * sp->c * sp->h * sp->w, (size_t)sp->k * (sp->c / sp->groups) * sp->r * sp->s,
        (size_t)sp->n * sp->k * sp->p * sp->q, (size_t)sp->n * sp->k * sp->p * sp->q,
        (size_t)sp->k};
    bg_buffers b;
    float **slots[5] = {&b.x, &b.w, &b.y, &b.z, &b.bias};
    for (int i = 0; i < 5; ++i) {
        BG_CUDA("cudaMalloc", cudaMalloc((void **)slots[i], sizes[i] * sizeof(float)));
        BG_CUDA("cudaMemset", cudaMemset(*slots[i], 0, sizes[i] * sizeof(float)));
    }
    cudaEvent_t start, stop;
    BG_CUDA("cudaEventCreate", cudaEventCreate(&start));
    BG_CUDA("cudaEventCreate", cudaEventCreate(&stop));
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
        const cudnnConvolutionFwdAlgo_t algo = (cudnnConvolutionFwdAlgo_t)a;
        size_t bytes = 0;
        void *ws = NULL;
        if (bg_conv_fits(h, &c, algo, BG_MATH, &bytes) != 0 ||
            (bytes > 0 && cudaMalloc(&ws, bytes) != cudaSuccess)) {
            printf("problem %d algo %d cannot run\n", index, a);
            continue;
        }
        if (bg_call(h, pr, &c, &b, algo, ws, bytes, relu) != CUDNN_STATUS_SUCCESS ||
            cudaStreamSynchronize(stream) != cudaSuccess) {
            printf("problem %d algo %d cannot run\n", index, a);
            cudaFree(ws);
            continue;
        }
        cudaEventRecord(start, stream);
        for (int i = 0; i < ITERATIONS; ++i) bg_call(h, pr, &c, &b, algo, ws, bytes, relu);
        cudaEventRecord(stop, stream);
        cudaEventSynchronize(stop);
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        printf("problem %d algo %d seconds %.9g workspace %zu\n", index, a,
               ms / 1e3 / ITERATIONS, bytes);
        cudaFree(ws);
    }
    for (int i = 0; i < 5; ++i) cudaFree(*slots[i]);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    bg_conv_destroy(&c);
    return 0;
}

static int bg_setup(bg_env *env, cudaStream_t *stream, cudnnHandle_t *h,
                    cudnnActivationDescriptor_t *relu)
{
    const char *where = "setup";
    BG_CUDA("cudaStreamCreate", cudaStreamCreate(stream));
    BG_CUDNN("cudnnCreate", cudnnCreate(h));
    BG_CUDNN("cudnnSetStream", cudnnSetStream(*h, *stream));
    BG_CUDNN("cudnnCreateActivationDescriptor", cudnnCreateActivationDescriptor(relu));
    BG_CUDNN("cudnnSetActivationDescriptor", cudnnSetActivationDescriptor(
        *relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    return 0;
}

int main(void)
{
    char error[512] = "";
    bg_env env;
    memset(&env, 0, sizeof env);
    env.error = error;
    env.error_size = sizeof error;
    cudaStream_t stream;
    cudnnHandle_t h;
    cudnnActivationDescriptor_t relu;
    int status = bg_setup(&env, &stream, &h, &relu);
    for (int i = 0; status == 0 && i < (int)(sizeof problems / sizeof problems[0]); ++i)
        status = bg_time(&env, h, stream, i, &problems[i], relu);
    if (status != 0) printf("failed: %s\n", error);
    return status == 0 ? 0 : 1;
}
"""


def _spec(problem: ConvProblem) -> str:
    n, c, h, w = problem.x
    k, _, r, s = problem.w
    p, q = problem.y[2:]
    return (f"{{{n}, {c}, {h}, {w}, {k}, {r}, {s}, {p}, {q}, {problem.groups}, "
            f"{problem.pads[0]}, {problem.pads[1]}, {problem.strides[0]}, {problem.strides[1]}, "
            f"{problem.dilations[0]}, {problem.dilations[1]}, -1}}")


def profiler_source(jobs: Sequence[Job]) -> str:
    """A standalone program timing every algorithm of each job's convolution."""
    math = jobs[0].math
    table = [f"    /* {i}: {key_text(j.problem.key())} */\n"
             f"    {{{_spec(j.problem)}, {CALLS.index(j.problem.call)}}},"
             for i, j in enumerate(jobs)]
    return "\n".join([
        "/* buildgen tune --backend cudnn: times each forward algorithm of these convolutions. */",
        PRELUDE.format(includes="#include <cudnn.h>\n#include <string.h>"),
        f"#define BG_MATH {math}",
        f"#define BG_WORKSPACE_LIMIT ((size_t){MAX_WORKSPACE})",
        f"#define ITERATIONS {ITERATIONS}",
        CHECK, TENSOR_HELPERS, CONV_DESCRIPTORS,
        "typedef struct bg_problem { bg_conv_spec spec; int call; } bg_problem;",
        "typedef struct bg_buffers { float *x, *w, *y, *z, *bias; } bg_buffers;",
        "static const bg_problem problems[] = {", *table, "};",
        _RUN,
    ])


def parse_timings(stdout: str) -> list[Timing]:
    timings = []
    for line in stdout.splitlines():
        words = line.split()
        if len(words) == 8 and words[0] == "problem" and words[4] == "seconds":
            timings.append(Timing(int(words[1]), ALGORITHMS[int(words[3])], float(words[5]),
                                  int(words[7])))
    return timings


@dataclass(frozen=True)
class Compiler:
    """nvcc with the cudnn module's compile and link flags."""

    nvcc: str
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...]
    include_dir: str  # buildgen's headers (buildgen_abi.h)

    def __call__(self, jobs: Sequence[Job], folder: Path) -> Path:
        source, program = folder / "bg_cudnn_profile.cu", folder / "bg_cudnn_profile"
        source.write_text(profiler_source(jobs))
        # The ldflags are the host linker's (a model's link runs the host compiler); nvcc
        # takes -Wl,<options> as -Xlinker=<options>.
        ldflags = [f"-Xlinker={f[4:]}" if f.startswith("-Wl,") else f for f in self.ldflags]
        done = subprocess.run([self.nvcc, *self.cflags, f"-I{self.include_dir}", str(source),
                               "-o", str(program), *ldflags], capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            raise error(f"nvcc could not build the cuDNN profiler {source}:\n"
                        f"{done.stderr.strip()[-2000:]}")
        return program


def run_profiler(jobs: Sequence[Job], program: Path, run: ProgramRunner = run_here
                 ) -> list[Timing]:
    done = run(program)
    if done.exit_code != 0:
        raise error(f"the cuDNN profiler failed: {(done.stdout + done.stderr).strip()[-400:]}")
    return parse_timings(done.stdout)


def cudnn_jobs(loaded: Loaded, build_dir: Path) -> list[Job]:
    from buildgen.backends.cudnn.backend import CudnnBackend, settings_of
    from buildgen.ir.serialize import load_weights

    assert loaded.partition is not None
    # Lowering folds constants (a BatchNormalization into the bias), so it reads the weights.
    weights = load_weights(loaded.graph, build_dir / loaded.pair.graph_files.weights)
    regions = CudnnBackend().lower(loaded.graph, loaded.partition, weights)
    settings = settings_of(loaded.target.instance("cudnn").as_dict())
    return jobs_for((c for r in regions for c in r.calls), settings)


class CudnnTuner:
    """`buildgen tune --backend cudnn` (buildgen.partition.tune.backend_cli)."""

    def pending(self, loaded: Loaded, records: Records, build_dir: Path) -> tuple[int, int]:
        jobs = cudnn_jobs(loaded, build_dir)
        return len(jobs), len(pending(jobs, records)) * len(ALGORITHMS)

    def tune(self, loaded: Loaded, records: Records, build_dir: Path, machine: str, *,
             retune: bool, run: ProgramRunner = run_here) -> Records:
        from buildgen.resources import include_dir

        toolchain = loaded.target.toolchain("cudnn")
        compiler = Compiler(toolchain.cc, toolchain.cflags, toolchain.ldflags,
                            str(include_dir()))
        return profile(cudnn_jobs(loaded, build_dir), records, machine,
                       build_dir / "tune" / "cudnn", compiler,
                       functools.partial(run_profiler, run=run), retune=retune)
