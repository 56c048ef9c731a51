"""LRN against onnxruntime, and against the ONNX formula in numpy where onnxruntime
refuses to run it (ranks other than 4, even sizes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_cases import (
    ATOL,
    RTOL,
    Case,
    CaseResults,
    node,
    rand,
    run_case_without_onnxruntime,
    run_cases,
)

RNG = np.random.default_rng(17)


def _lrn(name: str, shape: tuple[int, ...], **attrs: object) -> Case:
    return Case(name, [node("LRN", ["x"], ["y"], **attrs)], {"x": rand(RNG, *shape)}, ["y"])


def lrn_reference(x: np.ndarray, size: int, alpha=1e-4, beta=0.75, bias=1.0) -> np.ndarray:
    """The ONNX definition: the square sum runs over channels
    [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)], clipped to the tensor."""
    channels = x.shape[1]
    square_sum = np.zeros_like(x, dtype=np.float64)
    for c in range(channels):
        first, last = max(0, c - (size - 1) // 2), min(channels - 1, c + size // 2)
        square_sum[:, c] = (x[:, first : last + 1].astype(np.float64) ** 2).sum(axis=1)
    return (x / (bias + alpha / size * square_sum) ** beta).astype(np.float32)


CASES = [
    _lrn("default", (2, 5, 3, 4), size=3),
    _lrn("node_test", (5, 5, 5, 5), size=3, alpha=0.0002, beta=0.5, bias=2.0),
    _lrn("size_one", (2, 3, 2, 2), size=1, alpha=0.5),
    _lrn("wider_than_channels", (1, 3, 2, 5), size=7, alpha=0.3, beta=1.2),
]


@pytest.fixture(scope="module")
def results(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return run_cases(CASES, 13, tmp_path_factory.mktemp("c_lrn"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(results: CaseResults, case: Case) -> None:
    results.check(case)


@pytest.mark.parametrize(
    ("shape", "size"),
    [((3, 4), 3), ((2, 5, 7), 3), ((1, 4, 2, 3, 2), 3), ((1, 6, 2, 3), 4), ((2, 5, 3), 2)],
    ids=["2d", "3d", "5d", "even_size", "even_size_3d"],
)
def test_where_onnxruntime_refuses_follows_the_onnx_formula(
    shape: tuple[int, ...], size: int, c_toolchain: None, tmp_path: Path
) -> None:
    case = _lrn("lrn", shape, size=size, alpha=0.2, beta=0.6, bias=1.3)
    got = run_case_without_onnxruntime(case, 13, tmp_path)["y"]
    want = lrn_reference(case.feeds["x"], size, alpha=0.2, beta=0.6, bias=1.3)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
