"""IsNaN and IsInf (bool results) against onnxruntime, alone and in the pattern torch
exports for attention with a boolean mask: Where(IsNaN(Softmax(s)), 0, Softmax(s)), where
a fully masked row makes Softmax NaN. Both also under -ffast-math, which lets the
compiler fold isnan()/isinf() to 0: the generated tests must look at the bits."""

from __future__ import annotations

import re

import c_harness
import numpy as np
import pytest
from c_cases import Case, CaseResults, node, rand, run_cases

RNG = np.random.default_rng(19)
SPECIAL = np.array([-1.5, np.nan, np.inf, 2.75, -np.inf, 0.0, -0.0, -np.nan], np.float32)


def _unary(name: str, op: str, **attrs: object) -> Case:
    return Case(name, [node(op, ["x"], ["y"], **attrs)], {"x": SPECIAL.reshape(2, 4)}, ["y"])


def masked_attention() -> Case:
    """scores = q k^T / sqrt(d); masked scores become -inf; one query row is masked out
    entirely, so its Softmax row is 0/0 = NaN until the Where zeroes it."""
    b, h, s, d = 1, 2, 4, 8
    mask = np.tril(np.ones((s, s), bool))
    mask[2] = False  # query 2 may attend to nothing
    n = node
    return Case(
        "attention",
        [
            n("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
            n("MatMul", ["q", "kt"], ["qk"]),
            n("Mul", ["qk", "scale"], ["scores"]),
            n("Where", ["mask", "scores", "minus_inf"], ["masked"]),
            n("Softmax", ["masked"], ["probs"], axis=-1),
            n("IsNaN", ["probs"], ["nan"]),
            n("Where", ["nan", "zero", "probs"], ["clean"]),
            n("MatMul", ["clean", "v"], ["y"]),
        ],
        {
            "q": rand(RNG, b, h, s, d),
            "k": rand(RNG, b, h, s, d),
            "v": rand(RNG, b, h, s, d),
            "mask": mask,
        },
        ["y", "clean"],
        {
            "scale": np.array(1.0 / np.sqrt(d), np.float32),
            "minus_inf": np.array(-np.inf, np.float32),
            "zero": np.array(0.0, np.float32),
        },
    )


CASES = [
    _unary("isnan", "IsNaN"),
    _unary("isinf", "IsInf"),
    _unary("isinf_positive", "IsInf", detect_negative=0),
    _unary("isinf_negative", "IsInf", detect_positive=0),
    _unary("isinf_neither", "IsInf", detect_positive=0, detect_negative=0),
    Case(  # a bool intermediate feeding Not and Where, fused into one loop
        "where_not_isinf",
        [
            node("IsInf", ["x"], ["inf"]),
            node("Not", ["inf"], ["finite"]),
            node("Where", ["finite", "x", "big"], ["y"]),
        ],
        {"x": SPECIAL.reshape(2, 4)},
        ["y"],
        {"big": np.array(1e30, np.float32)},
    ),
    masked_attention(),
]


@pytest.fixture(scope="module", params=["default", "fast-math"])
def results(
    request: pytest.FixtureRequest, c_toolchain: None, tmp_path_factory: pytest.TempPathFactory
) -> CaseResults:
    flags = c_harness.CFLAGS + (("-ffast-math",) if request.param == "fast-math" else ())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(c_harness, "CFLAGS", flags)
        return run_cases(CASES, 17, tmp_path_factory.mktemp("c_nan_mask"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matches_onnxruntime(results: CaseResults, case: Case) -> None:
    results.check(case)


def test_attention_row_without_keys_is_zero(results: CaseResults) -> None:
    clean = results.actual["attention.clean"]
    assert not np.isnan(clean).any()
    np.testing.assert_array_equal(clean[:, :, 2], 0.0)


def test_isnan_and_where_fuse_into_one_loop(results: CaseResults) -> None:
    """The bool never reaches memory: IsNaN and Where are one loop over Softmax's output."""
    assert "_isnan_where(" in results.source


def test_tests_read_bits_not_libm(results: CaseResults) -> None:
    assert "bg_f32_bits(" in results.source
    assert not re.search(r"\b(isnan|isinf)\(", results.source)
