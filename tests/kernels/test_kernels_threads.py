"""The thread pool's promise (bg_threads.h): GEMM, its matrix-vector paths and convolution
give the same bits on any number of threads as on one. Shapes straddle the MR x NR tile
grid, KC slices and the parallel thresholds; beta != 0, epilogues with a transcendental
activation and both bias axes cover the paths whose rounding depends on the tile a result
lands in. Each shape runs on 1 thread (the reference) and on 2, 3 and 5."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from bgk_reference import ACT_CLIP, ACT_RELU, ACT_TANH
from conftest import Epilogue, Kernels, compile_c
from test_kernels_conv import Conv

THREADS = (2, 3, 5)

# (M, N, K): big enough to be split (>= 128 Ki multiply-adds), ragged on every edge
GEMMS = [
    (100, 301, 37 * 8),  # K crosses a KC slice
    (7, 2000, 64),  # few rows: split along N
    (515, 13, 300),  # few columns: split along M
    (192, 49, 600),  # split along M with B packed once a K slice, shared by the threads
    (64, 3136, 27),  # a first convolution's shape
    (1, 4099, 300),  # the row matrix-vector path
    (3001, 1, 200),  # the column matrix-vector path
]


def _gemm(kernels: Kernels, shape: tuple[int, int, int], threads: int, trans: tuple[int, int],
          prepacked: bool, ep: Epilogue) -> np.ndarray:
    m, n, k = shape
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((k, m) if trans[0] else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans[1] else (k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    kernels.sgemm(bool(trans[0]), bool(trans[1]), 0.75, a, b, 0.5, c, ep,
                  prepacked=prepacked, threads=threads)
    return c


@pytest.mark.parametrize("shape", GEMMS, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("trans", [(0, 0), (1, 1)], ids=["nn", "tt"])
@pytest.mark.parametrize("prepacked", [False, True], ids=["packs_b", "prepacked_b"])
def test_gemm_bits_do_not_depend_on_threads(
    kernels: Kernels, shape: tuple[int, int, int], trans: tuple[int, int], prepacked: bool
) -> None:
    m, n, _ = shape
    axis = 1 if n == 1 else 0
    bias = np.linspace(-1, 1, m if axis else n, dtype=np.float32)
    ep = Epilogue(bias, axis, ACT_TANH)
    one = _gemm(kernels, shape, 1, trans, prepacked, ep)
    assert np.isfinite(one).all()
    for threads in THREADS:
        many = _gemm(kernels, shape, threads, trans, prepacked, ep)
        assert many.tobytes() == one.tobytes(), f"{threads} threads changed the result"


CONVS = {
    "resnet_3x3": Conv(1, 32, 28, 28, 48, (3, 3), pads=(1, 1, 1, 1), act=ACT_RELU),
    "late_7x7_plane": Conv(1, 64, 7, 7, 200, (3, 3), pads=(1, 1, 1, 1)),
    # the shifted form's phase planes, big enough to be copied on every thread
    "strided_3x3": Conv(1, 32, 40, 40, 32, (3, 3), stride=(2, 2), pads=(1, 1, 1, 1)),
    "pointwise": Conv(1, 96, 20, 20, 64, (1, 1)),
    # a 7x7 stage: many filters, few pixels (B packed once, shared by the threads)
    "late_pointwise": Conv(1, 320, 7, 7, 192, (1, 1), act=ACT_RELU),
    "late_strided": Conv(1, 64, 14, 14, 160, (3, 3), stride=(2, 2), pads=(1, 1, 1, 1)),
    "groups_3_batch_2": Conv(2, 24, 16, 16, 30, (3, 3), group=3, stride=(2, 2),
                             pads=(1, 1, 1, 1)),
    "depthwise": Conv(2, 40, 30, 30, 40, (3, 3), group=40, pads=(1, 1, 1, 1), act=ACT_TANH),
    "depth_multiplier": Conv(1, 16, 33, 33, 32, (5, 5), group=16, stride=(2, 2),
                             pads=(2, 2, 2, 2)),
    # a stem, pixel by pixel (bands of rows a task)
    "pixel_stem": Conv(2, 3, 64, 66, 20, (3, 3), stride=(2, 2), pads=(1, 1, 1, 1),
                       act=ACT_RELU),
    # narrow strided planes, 8 channels a task (channels last), a last block of 4
    "depthwise_narrow_strided": Conv(2, 196, 14, 14, 196, (5, 5), group=196, stride=(2, 2),
                                     pads=(1, 1, 2, 2), act=ACT_CLIP),
}


def _conv(kernels: Kernels, conv: Conv, threads: int, prepacked: bool) -> np.ndarray:
    rng = np.random.default_rng(conv.c + conv.m)
    x = rng.standard_normal((conv.n, conv.c, conv.h, conv.w)).astype(np.float32)
    w = rng.standard_normal((conv.m, conv.c // conv.group, *conv.k)).astype(np.float32)
    bias = rng.standard_normal(conv.m).astype(np.float32) if conv.bias else None
    y = np.empty((conv.n, conv.m, *conv.out_hw()), np.float32)
    kernels.conv2d(conv.params(), x, w, Epilogue(bias, 0, conv.act), y, prepacked=prepacked,
                   threads=threads)
    return y


@pytest.mark.parametrize("name", sorted(CONVS))
@pytest.mark.parametrize("prepacked", [False, True], ids=["filters", "prepacked"])
def test_conv_bits_do_not_depend_on_threads(kernels: Kernels, name: str, prepacked: bool
                                            ) -> None:
    one = _conv(kernels, CONVS[name], 1, prepacked)
    for threads in THREADS:
        many = _conv(kernels, CONVS[name], threads, prepacked)
        assert many.tobytes() == one.tobytes(), f"{threads} threads changed the result"


# N, C, H, W, OH, OW, KH, KW, strides, dilations, pads (top, left, bottom, right): pools with
# enough taps to be shared among threads (bg__pool2d_run), edges and strides included.
POOLS = {
    "3x3_s1_pad": [1, 64, 28, 28, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1],
    "3x3_s2_ceil": [2, 48, 29, 29, 15, 15, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1],
    "7x7_narrow": [1, 512, 7, 7, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1],
}


@pytest.mark.parametrize("name", sorted(POOLS))
@pytest.mark.parametrize("kind", ["max", "avg", "avg_include_pad"])
def test_pool_bits_do_not_depend_on_threads(kernels: Kernels, name: str, kind: str) -> None:
    p = POOLS[name]
    x = np.random.default_rng(3).standard_normal(p[0] * p[1] * p[2] * p[3]).astype(np.float32)
    outputs = []
    for threads in (1, *THREADS):
        y = np.full(p[0] * p[1] * p[4] * p[5], np.nan, np.float32)
        kernels.pool2d(p, kind == "avg_include_pad", kind == "max", x, y, threads)
        outputs.append(y.tobytes())
    assert not np.isnan(np.frombuffer(outputs[0], np.float32)).any()
    assert all(o == outputs[0] for o in outputs[1:]), "threads changed the result"


POOL_STRESS = r"""
#include "bg_kernels.h"

typedef struct { int *hits; int64_t job; } stress_ctx;

static void count(const void *ctx, int64_t task, void *ws)
{
    (void)ws;
    const stress_ctx *c = (const stress_ctx *)ctx;
    __atomic_fetch_add(&c->hits[task], 1, __ATOMIC_RELAXED);
}

/* `jobs` jobs back to back on one pool of `threads`, job j of 1 + j % 7 tasks; returns how
 * many (job, task) pairs did not run exactly once (0), or -1 if the pool would not start. */
int stress(int threads, int jobs)
{
    char error[256];
    bg_threadpool *pool = bg_threadpool_create(threads, 0, error, sizeof error);
    if (pool == NULL) return -1;
    int wrong = 0;
    int hits[8];
    for (int j = 0; j < jobs; ++j) {
        const int64_t tasks = 1 + j % 7;
        for (int t = 0; t < 8; ++t) hits[t] = 0;
        stress_ctx c = {hits, j};
        bg_parallel(pool, tasks, count, &c, NULL);
        for (int t = 0; t < 8; ++t) wrong += hits[t] != (t < tasks);
    }
    bg_threadpool_destroy(pool);
    return wrong;
}
"""


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_many_small_jobs_run_every_task_once(tmp_path, threads: int) -> None:
    """Jobs of a few tasks, back to back, more threads than cores: workers wake late and
    check in while the caller writes the next job (bg_threads.h). Every task of every job
    runs once, and the caller never returns before its job's tasks are done."""
    src = tmp_path / "stress.c"
    src.write_text(POOL_STRESS)
    lib = tmp_path / "stress.so"
    compile_c(src, lib, ("-O2",))
    assert ctypes.CDLL(str(lib)).stress(threads, 20000) == 0
