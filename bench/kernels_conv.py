"""Single-thread time of bg_conv2d (bg_kernels.h, -O3, at the x86-64 level a `{kind: c}`
library picks on this CPU, as bench/kernels_gemm.py) next to onnxruntime
(one thread) on Conv+Relu layers of the small CNNs the `c` backend's product goal names:
3x3 convolutions with 32..128 channels at 14x14..56x56, 1x1 convolutions, depthwise.

    python bench/kernels_conv.py [--quick]

onnxruntime runs the same layer as a two-node model (Conv with bias, Relu) with all graph
optimisations on, so it may fuse them and switch layouts as it would in a real model. The
last column is bg / onnxruntime time (below 1: bg is faster). Each result is checked
against onnxruntime's before it is timed.
"""

from __future__ import annotations

import argparse
import ctypes
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernels_gemm import LEVEL  # noqa: E402

from buildgen.resources import include_dir  # noqa: E402

FLAGS = ["-std=c11", "-O3", f"-march={LEVEL}", "-fPIC", "-shared", "-fno-math-errno"]

BENCH_C = r"""
#define _GNU_SOURCE
#include "bg_kernels.h"
#include <stdlib.h>
#include <time.h>

static bg_conv2d_params params(const int64_t *q)
{
    bg_conv2d_params p = {q[0], q[1], q[2],  q[3],  q[4],  q[5],  q[6],  q[7],
                          q[8], q[9], q[10], q[11], q[12], q[13], q[14], q[15]};
    return p;
}

size_t bench_ws_bytes(const int64_t *q);
size_t bench_ws_bytes(const int64_t *q)
{
    const bg_conv2d_params p = params(q);
    return bg_conv2d_workspace_bytes(&p);
}

double bench_conv(const int64_t *q, const float *x, const float *w, const float *bias, float *y,
                  void *ws, int reps);
double bench_conv(const int64_t *q, const float *x, const float *w, const float *bias, float *y,
                  void *ws, int reps)
{
    const bg_conv2d_params p = params(q);
    const bg_epilogue ep = {bias, 1, BG_ACT_RELU, 0.0f, 0.0f, NULL};
    /* Constant filters are packed once, at create, as the generated code does. */
    const size_t packed_bytes = bg_conv2d_packed_bytes(&p);
    void *packed = packed_bytes ? aligned_alloc(64, (packed_bytes + 63) / 64 * 64) : NULL;
    if (packed) bg_conv2d_pack_weights(&p, w, packed);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < reps; ++r) {
        if (packed)
            bg_conv2d_prepacked(&p, x, packed, &ep, y, ws, NULL);
        else
            bg_conv2d(&p, x, w, &ep, y, ws, NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(packed);
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}
"""


@dataclass(frozen=True)
class Layer:
    name: str
    c: int
    hw: int
    m: int
    k: int
    stride: int = 1
    group: int = 1
    padding: int | None = None  # None: k // 2 ("same" at stride 1)

    @property
    def pad(self) -> int:
        return self.k // 2 if self.padding is None else self.padding

    @property
    def out(self) -> int:
        return (self.hw + 2 * self.pad - self.k) // self.stride + 1

    def params(self) -> list[int]:
        o, s, p = self.out, self.stride, self.pad
        return [1, self.c, self.hw, self.hw, self.m, o, o, self.k, self.k, self.group,
                s, s, 1, 1, p, p]  # fmt: skip

    def gflop(self) -> float:
        return 2.0 * self.m * self.out**2 * (self.c // self.group) * self.k**2 / 1e9


LAYERS = [
    Layer("stem 3->32 3x3", 3, 56, 32, 3),
    Layer("32->32 3x3", 32, 56, 32, 3),
    Layer("64->64 3x3", 64, 28, 64, 3),
    Layer("128->128 3x3", 128, 14, 128, 3),
    Layer("64->128 3x3 s2", 64, 56, 128, 3, stride=2),
    Layer("64->128 1x1", 64, 28, 128, 1),
    Layer("128->64 1x1", 128, 32, 64, 1),
    Layer("dw 64 3x3", 64, 56, 64, 3, group=64),
    Layer("dw 128 3x3 s2", 128, 56, 128, 3, stride=2, group=128),
    # ResNet-50's stem and its 7x7 stage (few pixels, many filters: the transposed form)
    Layer("stem 3->64 7x7 s2", 3, 224, 64, 7, stride=2),
    Layer("512->512 3x3", 512, 7, 512, 3),
    Layer("1024->2048 1x1 s2", 1024, 14, 2048, 1, stride=2),
    Layer("2048->512 1x1", 2048, 7, 512, 1),
    # SqueezeNet 1.1's stem (no padding), a fire module's 3x3 expand, its classifier
    Layer("stem 3->64 3x3 s2", 3, 224, 64, 3, stride=2, padding=0),
    Layer("16->64 3x3", 16, 55, 64, 3),
    Layer("64->256 3x3", 64, 13, 256, 3),
    Layer("512->1000 1x1", 512, 13, 1000, 1),
    # the cnn example's: small images, where a call's fixed costs show
    Layer("stem 3->32 3x3 32", 3, 32, 32, 3),
    Layer("32->32 3x3 16", 32, 16, 32, 3),
    Layer("32->64 3x3 8", 32, 8, 64, 3),
]


def build(tmp: Path) -> ctypes.CDLL:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("no C compiler found")
    src, lib = tmp / "bench.c", tmp / "bench.so"
    src.write_text(BENCH_C)
    subprocess.run([cc, *FLAGS, f"-I{include_dir()}", str(src), "-o", str(lib), "-lm"], check=True)
    dll = ctypes.CDLL(str(lib))
    vp = ctypes.c_void_p
    dll.bench_conv.argtypes = [vp, vp, vp, vp, vp, vp, ctypes.c_int]
    dll.bench_conv.restype = ctypes.c_double
    dll.bench_ws_bytes.argtypes = [vp]
    dll.bench_ws_bytes.restype = ctypes.c_size_t
    return dll


def ort_session(layer: Layer, w: np.ndarray, b: np.ndarray) -> Any:
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    p, s = layer.pad, layer.stride
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[layer.k, layer.k],
                         strides=[s, s], pads=[p, p, p, p], group=layer.group),
        helper.make_node("Relu", ["c"], ["y"]),
    ]  # fmt: skip
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, layer.c, layer.hw, layer.hw])
    y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    graph = helper.make_graph(nodes, "layer", [x_info], [y_info], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])  # fmt: skip


def best_seconds(run: Callable[[int], float], budget: float) -> float:
    """Seconds per call: calibrate a repeat count to ~budget/5, keep the best of 5."""
    reps = 1
    while (t := run(reps)) < budget / 20 and reps < 1 << 20:
        reps *= 2
    reps = max(1, int(reps * (budget / 5) / max(t, 1e-9)))
    return min(run(reps) / reps for _ in range(5))


def measure(dll: ctypes.CDLL, layer: Layer, budget: float) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, layer.c, layer.hw, layer.hw)).astype(np.float32)
    w = rng.standard_normal((layer.m, layer.c // layer.group, layer.k, layer.k))
    w = (w / np.sqrt(w[0].size)).astype(np.float32)
    b = rng.standard_normal(layer.m).astype(np.float32)
    y = np.empty((1, layer.m, layer.out, layer.out), np.float32)
    q = np.asarray(layer.params(), np.int64)
    ws = np.empty(max(1, dll.bench_ws_bytes(q.ctypes.data)), np.uint8)
    ptrs = [a.ctypes.data for a in (q, x, w, b, y, ws)]
    session = ort_session(layer, w, b)
    dll.bench_conv(*ptrs, 1)
    np.testing.assert_allclose(y, session.run(None, {"x": x})[0], rtol=1e-3, atol=1e-4)

    def run_ort(reps: int) -> float:
        t0 = time.perf_counter()
        for _ in range(reps):
            session.run(None, {"x": x})
        return time.perf_counter() - t0

    t_bg = best_seconds(lambda reps: float(dll.bench_conv(*ptrs, reps)), budget)
    return t_bg, best_seconds(run_ort, budget)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter timing budget")
    parser.add_argument("layers", nargs="*", help="only the layers whose names contain one")
    args = parser.parse_args()
    budget = 0.3 if args.quick else 1.0
    chosen = [la for la in LAYERS if not args.layers or any(s in la.name for s in args.layers)]
    with tempfile.TemporaryDirectory() as tmp:
        dll = build(Path(tmp))
        print(f"bg_conv2d at {LEVEL}, one thread")
        print(f"{'layer':<16} {'out':>6} {'bg us':>8} {'GFLOP/s':>8} {'ort us':>8} "
              f"{'GFLOP/s':>8} {'bg/ort':>7}")  # fmt: skip
        for layer in chosen:
            t_bg, t_ort = measure(dll, layer, budget)
            g = layer.gflop()
            print(f"{layer.name:<16} {layer.out:>3}x{layer.out:<2} {t_bg * 1e6:>8.1f} "
                  f"{g / t_bg:>8.1f} {t_ort * 1e6:>8.1f} {g / t_ort:>8.1f} "
                  f"{t_bg / t_ort:>7.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
