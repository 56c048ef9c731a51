"""bg_sgemm against numpy (float64): shapes on and off the 4x24 tile and the KC/MC/NC
block edges, every transpose combination, strided operands, alpha/beta, the fused epilogue,
and the M == 1 / N == 1 (GEMV) paths."""

from __future__ import annotations

import numpy as np
import pytest
from bgk_reference import (
    ACT_CLIP,
    ACT_LEAKY_RELU,
    ACT_NONE,
    ACT_RELU,
    ACT_SIGMOID,
    ACT_TANH,
    apply_act,
)
from conftest import Epilogue, Kernels

# (M, N, K): odd edges, exact tiles, and sizes that cross KC=256, MC=128, NC=3072, the
# small-M limit (16) below which B is read in place, and the small-M B-block cap.
SHAPES = [
    (1, 1, 1),
    (1, 65, 17),
    (65, 1, 17),
    (7, 17, 63),
    (17, 7, 1),
    (63, 65, 129),
    (129, 63, 65),
    (4, 24, 256),
    (8, 48, 257),
    (16, 40, 33),
    (17, 41, 520),
    (130, 50, 300),
    (20, 500, 300),  # M <= MC: B blocks capped to stay in L2, several column blocks
    (5, 3100, 3),
    (130, 3100, 5),  # M > MC and N > NC
]


def operand(rng: np.random.Generator, rows: int, cols: int, pad: int) -> np.ndarray:
    """A rows x cols view with row stride cols + pad (pad > 0 tests lda > K)."""
    full = rng.standard_normal((rows, cols + pad)).astype(np.float32)
    return full[:, :cols]


def reference(
    ta: bool,
    tb: bool,
    alpha: float,
    a: np.ndarray,
    b: np.ndarray,
    beta: float,
    c: np.ndarray,
    ep: Epilogue | None,
) -> np.ndarray:
    opa = a.T if ta else a
    opb = b.T if tb else b
    ref = alpha * (opa.astype(np.float64) @ opb.astype(np.float64))
    if beta != 0.0:
        ref += beta * c.astype(np.float64)
    if ep is None:
        return ref
    if ep.bias is not None:
        ref += ep.bias[None, :] if ep.bias_axis == 0 else ep.bias[:, None]
    return apply_act(ref, ep.act, ep.act_alpha, ep.act_beta)


def check(
    k: Kernels,
    m: int,
    n: int,
    kk: int,
    ta: bool,
    tb: bool,
    alpha: float = 1.0,
    beta: float = 0.0,
    ep: Epilogue | None = None,
    seed: int = 0,
    pad: int = 0,
    misalign: int = 0,
    prepacked: bool = False,
) -> None:
    rng = np.random.default_rng(seed)
    a = operand(rng, kk, m, pad) if ta else operand(rng, m, kk, pad)
    b = operand(rng, n, kk, pad) if tb else operand(rng, kk, n, pad)
    c = operand(rng, m, n, pad)
    c0 = c.copy()
    if beta == 0.0:
        c[...] = np.nan  # beta == 0 must not read C
    k.sgemm(ta, tb, alpha, a, b, beta, c, ep, misalign, prepacked)
    ref = reference(ta, tb, alpha, a, b, beta, c0, ep)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.sqrt(kk)))


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_shapes_and_transposes(
    kernels_any: Kernels, shape: tuple[int, int, int], ta: int, tb: int
) -> None:
    m, n, kk = shape
    check(kernels_any, m, n, kk, bool(ta), bool(tb), seed=m * 7 + n * 3 + kk)


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_prepacked_b(kernels: Kernels, shape: tuple[int, int, int], ta: int, tb: int) -> None:
    """bg_sgemm_pack_b + bg_sgemm_prepacked, including M == 1 / N == 1 (no GEMV path there)."""
    m, n, kk = shape
    ep = Epilogue(np.linspace(-1, 1, n, dtype=np.float32), 0, ACT_RELU)
    check(kernels, m, n, kk, bool(ta), bool(tb), 0.5, 0.5, ep, seed=kk, pad=3, prepacked=True)


@pytest.mark.parametrize("shape", [(20, 300, 600), (8, 200, 257), (13, 121, 520)],
                         ids=lambda s: "x".join(map(str, s)))
def test_prepacked_b_gives_the_bits_of_packed_b(kernels_any: Kernels,
                                                shape: tuple[int, int, int]) -> None:
    """With B packed ahead of time, each tile prefetches part of the next panel as it goes
    (bg__PREFETCH_STEP): its results keep the bits of B packed per call, over several row
    blocks (the prefetch's shares), column panels and K slices, ragged edges included."""
    m, n, kk = shape
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((m, kk)).astype(np.float32)
    b = rng.standard_normal((n, kk)).astype(np.float32)
    ep = Epilogue(rng.standard_normal(n).astype(np.float32), 0, ACT_RELU)
    out = []
    for prepacked in (False, True):
        c = np.full((m, n), 0.5, np.float32)
        kernels_any.sgemm(False, True, 1.0, a, b, 0.25, c, ep=ep, prepacked=prepacked)
        out.append(c)
    assert out[0].tobytes() == out[1].tobytes()


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (-0.5, 0.75), (2.0, 0.0), (1.0, -1.0)])
@pytest.mark.parametrize("shape", [(1, 33, 300), (33, 1, 300), (9, 29, 300), (70, 75, 600)])
def test_alpha_beta_across_k_slices(
    kernels: Kernels, shape: tuple[int, int, int], alpha: float, beta: float
) -> None:
    # K > KC: beta applies to the first K slice only; later slices accumulate.
    m, n, kk = shape
    check(kernels, m, n, kk, False, False, alpha, beta, seed=kk)


@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 1)])
def test_strided_operands(kernels_any: Kernels, ta: int, tb: int) -> None:
    check(kernels_any, 19, 53, 70, bool(ta), bool(tb), alpha=1.5, beta=0.5, pad=5)


ACTS = [
    (ACT_NONE, 0.0, 0.0),
    (ACT_RELU, 0.0, 0.0),
    (ACT_LEAKY_RELU, 0.1, 0.0),
    (ACT_CLIP, -0.5, 0.75),
    (ACT_SIGMOID, 0.0, 0.0),
    (ACT_TANH, 0.0, 0.0),
]


@pytest.mark.parametrize("act", ACTS, ids=lambda a: f"act{a[0]}")
@pytest.mark.parametrize("bias_axis", [None, 0, 1])
@pytest.mark.parametrize("shape", [(1, 37, 20), (37, 1, 20), (30, 53, 300)])
def test_epilogue(
    kernels_any: Kernels,
    shape: tuple[int, int, int],
    bias_axis: int | None,
    act: tuple[int, float, float],
) -> None:
    m, n, kk = shape
    rng = np.random.default_rng(5)
    bias = None
    if bias_axis is not None:
        bias = rng.standard_normal(n if bias_axis == 0 else m).astype(np.float32)
    ep = Epilogue(bias, bias_axis or 0, *act)
    # beta != 0 too: the epilogue comes after alpha*AB + beta*C, and only once (K > KC).
    check(kernels_any, m, n, kk, False, True, alpha=0.5, beta=0.5, ep=ep, seed=m + n)


@pytest.mark.parametrize("act", [ACTS[1], ACTS[-1]], ids=lambda a: f"act{a[0]}")
@pytest.mark.parametrize("bias_axis", [0, 1])
@pytest.mark.parametrize("prepacked", [False, True])
def test_the_8x32_tile_gives_the_bits_of_the_4x24_one(kernel_builds, bias_axis: int,
                                                      act: tuple[int, float, float],
                                                      prepacked: bool) -> None:
    """x86-64-v4's tile (16-lane accumulators) sums each output's products in the same order
    over the same K slices as AVX2's: a library's results do not depend on the level the CPU
    picks. Ragged edges on both sides, several K slices, a rows-only and a general epilogue."""
    avx2, avx512 = kernel_builds("avx2"), kernel_builds("avx512")
    rng = np.random.default_rng(11)
    m, n, kk = 77, 131, 600
    a = rng.standard_normal((m, kk)).astype(np.float32)
    b = rng.standard_normal((kk, n)).astype(np.float32)
    bias = rng.standard_normal(n if bias_axis == 0 else m).astype(np.float32)
    out = []
    for kernels in (avx2, avx512):
        c = np.full((m, n), 0.25, np.float32)
        kernels.sgemm(False, False, 1.0, a, b, 0.5, c, ep=Epilogue(bias, bias_axis, *act),
                      prepacked=prepacked)
        out.append(c)
    assert out[0].tobytes() == out[1].tobytes()


@pytest.mark.parametrize("prepacked", [False, True])
def test_a_row_alone_gives_the_bits_it_has_in_a_whole_tile(kernels_any: Kernels,
                                                           prepacked: bool) -> None:
    """A tile of one row (M = 1 with B prepacked, the last row of M = 9) runs its own kernel
    (bg__ukernel_row): each output must keep the bits it has as a row of a whole tile (the
    same rows of M = 16), over several K slices, with alpha, beta and an epilogue."""
    rng = np.random.default_rng(5)
    kk, n = 600, 75
    a = rng.standard_normal((16, kk)).astype(np.float32)
    b = rng.standard_normal((kk, n)).astype(np.float32)
    c0 = rng.standard_normal((16, n)).astype(np.float32)
    ep = Epilogue(rng.standard_normal(n).astype(np.float32), 0, ACT_RELU)
    out = {}
    for m in (16, 9, 1):
        if m == 1 and not prepacked:
            continue  # an unpacked B at M = 1 goes to the matrix-vector loops instead
        c = c0[:m].copy()
        kernels_any.sgemm(False, False, 0.5, np.ascontiguousarray(a[:m]), b, 0.75, c, ep,
                          prepacked=prepacked)
        out[m] = c
    assert out[9].tobytes() == out[16][:9].tobytes()
    if prepacked:
        assert out[1].tobytes() == out[16][:1].tobytes()


@pytest.mark.parametrize("misalign", [1, 4, 36, 63])
def test_unaligned_workspace(kernels: Kernels, misalign: int) -> None:
    check(kernels, 23, 31, 45, True, False, misalign=misalign)


@pytest.mark.parametrize("k_dim,alpha", [(0, 1.0), (13, 0.0)])
def test_no_product(kernels_any: Kernels, k_dim: int, alpha: float) -> None:
    """K == 0 or alpha == 0: C = epilogue(beta * C), and A/B are never read."""
    m, n = 6, 30
    rng = np.random.default_rng(1)
    # Views of one-larger NaN buffers, so that K == 0 still has valid strides.
    a = np.full((m, k_dim + 1), np.nan, np.float32)[:, :k_dim]
    b = np.full((k_dim + 1, n), np.nan, np.float32)[:k_dim]
    c = rng.standard_normal((m, n)).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    ep = Epilogue(bias, 1, ACT_RELU)
    expected = np.maximum(0.5 * c + bias[:, None], 0.0)
    kernels_any.sgemm(False, False, alpha, a, b, 0.5, c, ep)
    np.testing.assert_allclose(c, expected, rtol=1e-6)


def test_activations_vector_accuracy(kernels_any: Kernels) -> None:
    """The 8-lane exp-based sigmoid/tanh against float64, including tiny and huge inputs."""
    x = np.concatenate(
        [
            np.linspace(-20, 20, 4001),
            np.geomspace(1e-8, 0.7, 400),
            -np.geomspace(1e-8, 0.7, 400),
            np.array([-200.0, -90.0, -88.0, 88.0, 90.0, 200.0, 0.0, -0.0]),
        ]
    ).astype(np.float32)
    x = x[: x.size // 8 * 8]
    sig = kernels_any.act8(ACT_SIGMOID, 0.0, 0.0, x)
    np.testing.assert_allclose(sig, apply_act(x, ACT_SIGMOID), rtol=2e-6, atol=1e-30)
    th = kernels_any.act8(ACT_TANH, 0.0, 0.0, x)
    np.testing.assert_allclose(th, apply_act(x, ACT_TANH), rtol=2e-6, atol=1e-30)


def _k_loop(disassembly: str, function: str) -> list[str]:
    """The first loop of `function` (objdump -d) whose body multiplies-adds: the k loop."""
    from disassembly import function_lines, loops

    found = [loop for loop in loops(function_lines(disassembly, function))
             if any("vfmadd" in instruction for instruction in loop)]
    assert found, f"no multiply-add loop in {function}"
    return found[0]


def test_at_x86_64_v4_the_tile_steps_k_in_sixteen_512_bit_fmas(tmp_path):
    """AVX-512: the 8 x 32 tile's k step is 16 FMAs on 16 lanes (the 4 x 24 tile's was 4 on 16
    lanes and 4 on 8), from 2 loads of B and 8 broadcasts of A, with nothing spilled."""
    import shutil
    import subprocess

    from buildgen.resources import include_dir

    if shutil.which("objdump") is None:
        pytest.skip("objdump is not installed (binutils)")
    obj = tmp_path / "gemm.o"
    subprocess.run(["cc", "-std=c11", "-O3", "-march=x86-64-v4", "-fno-math-errno",
                    "-fno-trapping-math", "-DBG_KERNELS_ID=kfeed", f"-I{include_dir()}", "-c",
                    str(include_dir() / "bg_kernels_gemm.c"), "-o", str(obj)], check=True)
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)],
                          capture_output=True, text=True, check=True).stdout
    for function in ("bg__ukernel_full", "bg__ukernel_rows_full"):
        loop = _k_loop(text, function)
        fmas = [line for line in loop if "vfmadd" in line]
        assert len(fmas) == 16 and all("%zmm" in f for f in fmas), "\n".join(loop)
        assert len([line for line in loop if "vbroadcastss" in line]) == 8, "\n".join(loop)
        assert not any("(%rsp)" in line for line in loop), "\n".join(loop)
    # One row's k step: a broadcast and the row's two FMAs, B prefetched ahead, no spills.
    loop = _k_loop(text, "bg__ukernel_row")
    fmas = [line for line in loop if "vfmadd" in line]
    assert len(fmas) == 2 and all("%zmm" in f for f in fmas), "\n".join(loop)
    assert len([line for line in loop if "prefetch" in line]) == 2, "\n".join(loop)
    assert not any("(%rsp)" in line for line in loop), "\n".join(loop)
