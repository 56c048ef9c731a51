"""The row-major ONNX products as column-major cuBLAS calls, checked without a GPU: the
arguments the module passes (ops, m, n, k, leading dims, batch strides) drive a numpy model
of cublasGemmStridedBatchedEx's documented semantics, whose result must be ONNX's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cpulib_build import imported
from cpulib_cases import Builder

from buildgen.backends.cublas.module import gemm_args
from buildgen.backends.cublas.support import gemm_geometry


def _column_major(flat: np.ndarray, offset: int, rows: int, cols: int, ld: int) -> np.ndarray:
    """The rows x cols matrix stored column-major at `offset` with leading dimension `ld`."""
    index = offset + np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld
    return flat[index]


def strided_batched_gemm(op_a: str, op_b: str, m: int, n: int, k: int, a: np.ndarray,
                         lda: int, stride_a: int, b: np.ndarray, ldb: int, stride_b: int,
                         ldc: int, stride_c: int, batch: int, alpha: float) -> np.ndarray:
    """cuBLAS: C[i] = alpha * op(A[i]) op(B[i]), column-major; op(A) is m x k, op(B) k x n."""
    c = np.zeros(stride_c * (batch - 1) + ldc * n, np.float64)
    for i in range(batch):
        mat_a = (_column_major(a, i * stride_a, m, k, lda) if op_a == "CUBLAS_OP_N"
                 else _column_major(a, i * stride_a, k, m, lda).T)
        mat_b = (_column_major(b, i * stride_b, k, n, ldb) if op_b == "CUBLAS_OP_N"
                 else _column_major(b, i * stride_b, n, k, ldb).T)
        product = alpha * mat_a @ mat_b
        index = i * stride_c + np.arange(m)[:, None] + np.arange(n)[None, :] * ldc
        c[index] = product
    return c


def _model(tmp_path: Path):
    b = Builder("mapping")
    b.outputs += [
        b.node("MatMul", [b.input("x", [2, 3, 4, 5]), b.weight("w", [5, 6])], "folded"),
        b.node("MatMul", [b.input("p", [3, 4, 5]), b.input("q", [3, 5, 6])], "both"),
        b.node("MatMul", [b.input("u", [4, 5]), b.input("v", [2, 3, 5, 6])], "shared"),
        b.node("Gemm", [b.input("ga", [5, 4]), b.weight("gb", [6, 5])], "gemm_tt",
               transA=1, transB=1, alpha=0.5),
        b.node("Gemm", [b.input("gc", [4, 5]), b.weight("gd", [5, 6])], "gemm_nn"),
    ]
    return imported(b.model(), {}, tmp_path)


def _onnx(node_op: str, a: np.ndarray, b: np.ndarray, attrs: dict) -> np.ndarray:
    if node_op == "MatMul":
        return np.matmul(a, b)
    a = a.T if attrs.get("transA") else a
    b = b.T if attrs.get("transB") else b
    return attrs.get("alpha", 1.0) * a @ b


@pytest.mark.parametrize("name", ["/folded", "/both", "/shared", "/gemm_tt", "/gemm_nn"])
def test_call_arguments_compute_the_onnx_product(name: str, tmp_path: Path) -> None:
    graph, weights = _model(tmp_path)
    node = graph.node(name)
    geometry = gemm_geometry(node, graph)
    assert not isinstance(geometry, str)
    op_b, op_a, m, n, k, ldb, lda = gemm_args(geometry)
    rng = np.random.default_rng(0)
    a, b = (weights[t] if graph.is_weight(t) else
            rng.standard_normal(graph.type_of(t).shape).astype(np.float32)
            for t in node.inputs[:2])
    g = geometry
    # As the module calls it: cuBLAS's A is ONNX's B, its B is ONNX's A; C is Y, ld N.
    flat = strided_batched_gemm(op_b, op_a, m, n, k, b.reshape(-1), ldb, g.stride_b,
                                a.reshape(-1), lda, g.stride_a, m, g.m * g.n, g.batch, g.alpha)
    expected = _onnx(node.op, a, b, dict(node.attrs))
    np.testing.assert_allclose(flat.reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)
