"""Single-thread GFLOP/s of bg_sgemm (bg_kernels.h, -O3, at the x86-64 level a `{kind: c}`
library picks on this CPU: -v4 where it has AVX-512, else -v3) next to numpy's
BLAS limited to one thread, on the GEMM shapes the `c` backend's product goal names (MLP
layers, im2col'd convolutions) and square 256..1024.

    python bench/kernels_gemm.py [--quick]

Both sides are timed in the same run, on the same buffers, best of several repeats; the
last column is bg_sgemm / numpy. "prepacked" times bg_sgemm_prepacked with B packed
beforehand (what the backend does for constant weights), and "% peak" sets it against
the core's FMA peak measured in the same run (twelve independent FMA chains) at the width
of the micro-kernel's accumulators: 16 lanes at x86-64-v4, 8 below. The timing
loop runs inside C so ctypes overhead stays out. Other processes on the machine skew every
column: rerun.
"""

from __future__ import annotations

import os

# Before numpy loads its BLAS: one thread, as the `c` backend runs.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import ctypes  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from buildgen.resources import include_dir  # noqa: E402


def _level() -> str:
    """x86-64-v4 where the CPU has what bg_cpu.h asks of it (as create picks), else -v3."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return "x86-64-v3"
    wanted = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
    return "x86-64-v4" if wanted <= flags else "x86-64-v3"


LEVEL = _level()
FLAGS = ["-std=c11", "-O3", f"-march={LEVEL}", "-fPIC", "-shared", "-fno-math-errno"]

BENCH_C = r"""
#define _GNU_SOURCE /* bg_threads.h: pthread_sigmask, sched_getaffinity */
#include "bg_kernels.h"
#include <time.h>

double bench_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                   const float *B, float *C, void *ws, int reps);
double bench_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                   const float *B, float *C, void *ws, int reps)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < reps; ++r)
        bg_sgemm(ta, tb, M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.0f, C, N, NULL, ws, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

/* B packed once up front (as the `c` backend can do for constant weights); times only the
 * bg_sgemm_prepacked calls. */
double bench_sgemm_prepacked(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                             const float *B, float *C, void *ws, int reps, void *packed);
double bench_sgemm_prepacked(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                             const float *B, float *C, void *ws, int reps, void *packed)
{
    bg_sgemm_pack_b(tb, N, K, B, tb ? K : N, packed);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < reps; ++r)
        bg_sgemm_prepacked(ta, M, N, K, 1.0f, A, ta ? M : K, packed, 0.0f, C, N, NULL, ws, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

/* The machine's single-core FP32 peak as this ISA reaches it: twelve independent 8-lane FMA
 * chains (enough to cover two FMA pipes' latency), no memory traffic. Seconds for reps. */
double bench_peak(int64_t reps, float *sink);
double bench_peak(int64_t reps, float *sink)
{
    bg_v8f acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = BG_SPLAT8(1.0f + (float)i * 1e-3f);
    const bg_v8f mul = BG_SPLAT8(0.999999f), add = BG_SPLAT8(1e-7f);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int64_t r = 0; r < reps; ++r)
        for (int i = 0; i < 12; ++i) acc[i] = BG_FMA8(acc[i], mul, add);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    float s = 0.0f;
    for (int i = 0; i < 12; ++i) s += acc[i][0];
    *sink = s;
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

/* The same with the widest FMA the CPU has, where it is wider than the kernels' 8 lanes:
 * 16-lane AVX-512 (0 on a CPU without it). A CPU that executes AVX-512 at full rate (Intel
 * Xeon since Skylake-SP) peaks twice as high as 8 lanes reach; one that splits 512-bit
 * operations in two (AMD Zen 4) peaks where 8 lanes do. */
typedef float bench_v16f __attribute__((vector_size(64)));
__attribute__((target("avx512f"))) static double bench_peak16(int64_t reps, float *sink)
{
    bench_v16f acc[12], mul, add;
    for (int l = 0; l < 16; ++l) {
        mul[l] = 0.999999f;
        add[l] = 1e-7f;
        for (int i = 0; i < 12; ++i) acc[i][l] = 1.0f + (float)i * 1e-3f;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int64_t r = 0; r < reps; ++r)
        for (int i = 0; i < 12; ++i)
            acc[i] = __builtin_ia32_vfmaddps512_mask(acc[i], mul, add, (short)-1, 4);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    float s = 0.0f;
    for (int i = 0; i < 12; ++i) s += acc[i][0];
    *sink = s;
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

double bench_peak_wide(int64_t reps, float *sink);
double bench_peak_wide(int64_t reps, float *sink)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? bench_peak16(reps, sink) : 0.0;
}

size_t bench_packed_bytes(int64_t N, int64_t K);
size_t bench_packed_bytes(int64_t N, int64_t K) { return bg_sgemm_packed_b_bytes(N, K); }

size_t bench_ws_bytes(int64_t M, int64_t N, int64_t K);
size_t bench_ws_bytes(int64_t M, int64_t N, int64_t K) { return bg_sgemm_workspace_bytes(M, N, K); }
"""

# (M, N, K, trans_b): MLP layers at batch 8..64 (Linear weights are stored [N, K]: trans_b),
# convolutions as GEMMs (M = out channels, N = OH*OW, K = C*9), and square sizes.
SHAPES = [
    (1, 1024, 1024, 0),
    (1, 1024, 1024, 1),
    (8, 512, 512, 0),
    (8, 512, 512, 1),
    (64, 1024, 1024, 0),
    (64, 1024, 1024, 1),
    (32, 1024, 288, 0),
    (64, 3136, 576, 0),
    (128, 784, 1152, 0),
    (256, 256, 256, 0),
    (512, 512, 512, 0),
    (1024, 1024, 1024, 0),
    (1024, 1024, 1024, 1),
]


def build(tmp: Path) -> ctypes.CDLL:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("no C compiler found")
    src, lib = tmp / "bench.c", tmp / "bench.so"
    src.write_text(BENCH_C)
    subprocess.run([cc, *FLAGS, f"-I{include_dir()}", str(src), "-o", str(lib), "-lm"], check=True)
    dll = ctypes.CDLL(str(lib))
    fp, i64 = ctypes.c_void_p, ctypes.c_int64
    dll.bench_sgemm.argtypes = [ctypes.c_int, ctypes.c_int, i64, i64, i64, fp, fp, fp, fp,
                                ctypes.c_int]  # fmt: skip
    dll.bench_sgemm.restype = ctypes.c_double
    dll.bench_sgemm_prepacked.argtypes = [*dll.bench_sgemm.argtypes, fp]
    dll.bench_sgemm_prepacked.restype = ctypes.c_double
    dll.bench_packed_bytes.argtypes = [i64, i64]
    dll.bench_packed_bytes.restype = ctypes.c_size_t
    dll.bench_ws_bytes.argtypes = [i64, i64, i64]
    dll.bench_ws_bytes.restype = ctypes.c_size_t
    dll.bench_peak.argtypes = [i64, ctypes.POINTER(ctypes.c_float)]
    dll.bench_peak.restype = ctypes.c_double
    dll.bench_peak_wide.argtypes = dll.bench_peak.argtypes
    dll.bench_peak_wide.restype = ctypes.c_double
    return dll


def peak_gflops(dll: ctypes.CDLL, budget: float) -> float:
    """Single-core FP32 GFLOP/s of back-to-back 8-lane FMAs: the ceiling bg_sgemm aims at."""
    sink = ctypes.c_float()
    seconds = best_seconds(lambda reps: float(dll.bench_peak(reps * 100_000, sink)), budget)
    return 12 * 8 * 2 * 100_000 / seconds / 1e9


def wide_peak_gflops(dll: ctypes.CDLL, budget: float) -> float | None:
    """The same with 16-lane AVX-512 FMAs; None on a CPU without AVX-512."""
    sink = ctypes.c_float()
    if dll.bench_peak_wide(1, sink) == 0.0:
        return None
    seconds = best_seconds(lambda reps: float(dll.bench_peak_wide(reps * 100_000, sink)),
                           budget)
    return 12 * 16 * 2 * 100_000 / seconds / 1e9


def tile_peak_gflops(dll: ctypes.CDLL, budget: float) -> tuple[int, float]:
    """(lanes, GFLOP/s): the FMA peak at the width bg_sgemm's micro-kernel computes in at
    LEVEL (bg_gemm.h: 16-lane accumulators at x86-64-v4, 8-lane below)."""
    if LEVEL == "x86-64-v4":
        wide = wide_peak_gflops(dll, budget)
        if wide is not None:
            return 16, wide
    return 8, peak_gflops(dll, budget)


def best_seconds(run: Callable[[int], float], budget: float) -> float:
    """Seconds per call: calibrate a repeat count to ~budget/5, keep the best of 5."""
    reps = 1
    while (t := run(reps)) < budget / 20 and reps < 1 << 20:
        reps *= 2
    reps = max(1, int(reps * (budget / 5) / max(t, 1e-9)))
    return min(run(reps) / reps for _ in range(5))


def measure(dll: ctypes.CDLL, m: int, n: int, k: int, tb: int, budget: float,
            rng: np.random.Generator) -> tuple[float, float, float]:  # fmt: skip
    """GFLOP/s of bg_sgemm, bg_sgemm_prepacked and numpy on one shape."""
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    c = np.empty((m, n), np.float32)
    ws = np.empty(dll.bench_ws_bytes(m, n, k), np.uint8)
    packed = np.empty(dll.bench_packed_bytes(n, k), np.uint8)
    ptrs = [x.ctypes.data for x in (a, b, c, ws)]
    bt = b.T if tb else b

    def run_bg(reps: int) -> float:
        return float(dll.bench_sgemm(0, tb, m, n, k, *ptrs, reps))

    def run_prepacked(reps: int) -> float:
        return float(dll.bench_sgemm_prepacked(0, tb, m, n, k, *ptrs, reps, packed.ctypes.data))

    def run_numpy(reps: int) -> float:
        t0 = time.perf_counter()
        for _ in range(reps):
            np.matmul(a, bt, out=c)
        return time.perf_counter() - t0

    gflop = 2.0 * m * n * k / 1e9
    runs = (run_bg, run_prepacked, run_numpy)
    bg, prepacked, numpy = (gflop / best_seconds(run, budget) for run in runs)
    return bg, prepacked, numpy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter timing budget")
    budget = 0.3 if parser.parse_args().quick else 1.0
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        dll = build(Path(tmp))
        lanes, peak = tile_peak_gflops(dll, budget)
        print(f"single-core {lanes}-lane FMA peak ({LEVEL}): {peak:.1f} GFLOP/s")
        print(f"{'M x N x K':>18} {'transB':>6} {'bg GFLOP/s':>11} {'prepacked':>10} "
              f"{'% peak':>7} {'numpy':>8} {'bg/numpy':>9}")  # fmt: skip
        for m, n, k, tb in SHAPES:
            bg, prepacked, numpy = measure(dll, m, n, k, tb, budget, rng)
            print(f"{m:>5} x{n:>5} x{k:>5} {tb:>6} {bg:>11.1f} {prepacked:>10.1f} "
                  f"{100 * prepacked / peak:>6.0f}% {numpy:>8.1f} {bg / numpy:>9.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
