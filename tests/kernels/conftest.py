"""Build tests/kernels/harness.c against bg_kernels.h and call it through ctypes.

Every build uses the flags the `c` backend compiles with (-std=c11 -Wall -Wextra -Werror);
`FLAGS` adds the variants the kernels must survive: AVX2/FMA, AVX-512 (the GEMM's 16-wide
pair kernel; where the CPU has it), no -march (generic x86-64 or whatever the host compiler
defaults to), and -O0, which catches code whose result depends on
optimisation (uninitialised reads, reliance on contraction, UB).
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from buildgen.resources import include_dir

HARNESS = Path(__file__).with_name("harness.c")
BASE_FLAGS = ("-std=c11", "-fPIC", "-shared", "-pthread", "-Wall", "-Wextra", "-Werror",
              "-fno-math-errno")
FLAGS = {
    "avx2": ("-O3", "-march=x86-64-v3"),
    "avx512": ("-O3", "-march=x86-64-v4"),
    "generic": ("-O2",),
    "O0": ("-O0",),
}

F32P = ctypes.POINTER(ctypes.c_float)
I64P = ctypes.POINTER(ctypes.c_int64)
i32, i64, f32 = ctypes.c_int, ctypes.c_int64, ctypes.c_float


def _cpu_flags() -> set[str]:
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return set(next((line.split() for line in info.splitlines() if line.startswith("flags")), []))


def host_has_avx2_fma() -> bool:
    return {"avx2", "fma"} <= _cpu_flags()


# What each -march level needs of the CPU running the harness.
_MARCH_NEEDS = {"-march=x86-64-v3": {"avx2", "fma"},
                "-march=x86-64-v4": {"avx2", "fma", "avx512f", "avx512bw", "avx512dq",
                                     "avx512vl"}}


def compiler() -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    return cc


def compile_c(src: Path, out: Path, flags: tuple[str, ...]) -> None:
    cmd = [compiler(), *BASE_FLAGS, *flags, f"-I{include_dir()}", str(src), "-o", str(out), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"


def fptr(a: np.ndarray | None) -> ctypes._Pointer[ctypes.c_float] | None:
    if a is None:
        return None
    assert a.dtype == np.float32 and a.flags.c_contiguous
    return a.ctypes.data_as(F32P)


@dataclass(frozen=True)
class Epilogue:
    bias: np.ndarray | None = None
    bias_axis: int = 0
    act: int = 0
    act_alpha: float = 0.0
    act_beta: float = 0.0


class Kernels:
    """ctypes view of one build of the harness."""

    def __init__(self, path: Path) -> None:
        lib = ctypes.CDLL(str(path))
        # the C prototype, grouped: trans, sizes, alpha, A, B, beta, C, epilogue, misalign
        lib.h_sgemm.argtypes = [
            *(i32, i32), *(i64, i64, i64), f32, *(F32P, i64), *(F32P, i64), f32, *(F32P, i64),
            *(i32, F32P, i32, i32, f32, f32), i64, i32,
        ]  # fmt: skip
        lib.h_sgemm.restype = i32
        lib.h_sgemm_prepacked.argtypes = lib.h_sgemm.argtypes
        lib.h_sgemm_prepacked.restype = i32
        lib.h_conv2d.argtypes = [I64P, F32P, F32P, i32, F32P, i32, f32, f32, F32P, i64, i32, i32]
        lib.h_conv2d.restype = i32
        lib.h_pool2d.argtypes = [I64P, i32, i32, F32P, F32P, i32]
        lib.h_pool2d.restype = None
        lib.h_act8.argtypes = [i32, f32, f32, F32P, i64]
        lib.h_act8.restype = None
        lib.h_math.argtypes = [i32, F32P, F32P, i64]
        lib.h_math.restype = None
        lib.h_transpose2d.argtypes = [ctypes.c_void_p, ctypes.c_void_p, i64, i64, i64, i64, i64]
        lib.h_transpose2d.restype = None
        lib.h_alloc_constants.argtypes = [ctypes.c_size_t]
        lib.h_alloc_constants.restype = ctypes.c_void_p
        self.lib = lib

    def sgemm(
        self,
        ta: bool,
        tb: bool,
        alpha: float,
        a: np.ndarray,
        b: np.ndarray,
        beta: float,
        c: np.ndarray,
        ep: Epilogue | None = None,
        misalign: int = 0,
        prepacked: bool = False,
        threads: int = 1,
    ) -> None:
        """C = epilogue(alpha op(A) op(B) + beta C), in place; a, b, c may be strided views
        of row-major buffers (their row stride is passed as the leading dimension).
        prepacked: go through bg_sgemm_pack_b + bg_sgemm_prepacked; threads > 1: on a
        thread pool of that size."""
        m, n = c.shape
        k = a.shape[0] if ta else a.shape[1]
        for arr in (a, b, c):
            assert arr.dtype == np.float32 and arr.strides[1] == 4
        e = ep or Epilogue()
        fn = self.lib.h_sgemm_prepacked if prepacked else self.lib.h_sgemm
        rc = fn(
            int(ta), int(tb), m, n, k, alpha,
            a.ctypes.data_as(F32P), a.strides[0] // 4, b.ctypes.data_as(F32P), b.strides[0] // 4,
            beta, c.ctypes.data_as(F32P), c.strides[0] // 4,
            int(ep is not None), fptr(e.bias), e.bias_axis, e.act, e.act_alpha, e.act_beta,
            misalign, threads,
        )  # fmt: skip
        assert rc == 0, "bg_sgemm wrote past its workspace"

    def conv2d(
        self,
        params: list[int],
        x: np.ndarray,
        w: np.ndarray,
        ep: Epilogue | None,
        y: np.ndarray,
        misalign: int = 0,
        prepacked: bool = False,
        threads: int = 1,
    ) -> None:
        """prepacked: filters through bg_conv2d_pack_weights + bg_conv2d_prepacked; threads
        > 1: on a thread pool of that size."""
        p = np.asarray(params, dtype=np.int64)
        e = ep or Epilogue()
        rc = self.lib.h_conv2d(
            p.ctypes.data_as(I64P),
            fptr(x),
            fptr(w),
            int(ep is not None),
            fptr(e.bias),
            e.act,
            e.act_alpha,
            e.act_beta,
            fptr(y),
            misalign,
            int(prepacked),
            threads,
        )
        assert rc == 0, "bg_conv2d wrote past its workspace"

    def pool2d(
        self, params: list[int], count_include_pad: bool, is_max: bool, x: np.ndarray,
        y: np.ndarray, threads: int = 1,
    ) -> None:
        p = np.asarray(params, dtype=np.int64)
        self.lib.h_pool2d(
            p.ctypes.data_as(I64P), int(count_include_pad), int(is_max), fptr(x), fptr(y),
            threads,
        )

    def math(self, which: int, x: np.ndarray) -> np.ndarray:
        """bg_math.h's function `which` (0 exp, 1 tanh, 2 erf, 3 sigmoid) on every value, or
        bg_kernels.h's selects (4 hardswish, 5 hardsigmoid(0.3, 0.4), 6 fmax and 7 fmin of
        x[i] and x[n-1-i])."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        y = np.empty_like(x)
        self.lib.h_math(which, fptr(x), fptr(y), x.size)
        return y

    def transpose2d(self, x: np.ndarray, rows: int, cols: int, y: np.ndarray) -> None:
        """bg_transpose2d from 2-D x (cols rows of at least `rows` elements) into 2-D y
        (rows rows of at least `cols`), each read at its own row stride."""
        size = x.itemsize
        self.lib.h_transpose2d(x.ctypes.data, y.ctypes.data, rows, cols, x.strides[0] // size,
                               y.strides[0] // size, size)

    def act8(self, act: int, act_alpha: float, act_beta: float, v: np.ndarray) -> np.ndarray:
        out = np.ascontiguousarray(v, dtype=np.float32).copy()
        self.lib.h_act8(act, act_alpha, act_beta, fptr(out), out.size)
        return out


@pytest.fixture(scope="session")
def kernel_builds(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Kernels]:
    """Compile the harness once per flag set, on first use."""
    cache: dict[str, Kernels] = {}
    root = tmp_path_factory.mktemp("bg_kernels")

    def get(name: str) -> Kernels:
        if name not in cache:
            for flag in FLAGS[name]:
                if not _MARCH_NEEDS.get(flag, set()) <= _cpu_flags():
                    pytest.skip(f"this CPU cannot run {flag[len('-march='):]} code")
            out = root / f"harness_{name}.so"
            compile_c(HARNESS, out, FLAGS[name])
            cache[name] = Kernels(out)
        return cache[name]

    return get


@pytest.fixture(params=sorted(FLAGS))
def kernels_any(request: pytest.FixtureRequest, kernel_builds: Callable[[str], Kernels]) -> Kernels:
    """The harness under every flag set (for the smaller, edge-heavy cases)."""
    return kernel_builds(request.param)


@pytest.fixture
def kernels(kernel_builds: Callable[[str], Kernels]) -> Kernels:
    """The harness as the `c` backend builds it for this machine kind (-O3, AVX2/FMA)."""
    return kernel_builds("avx2")
