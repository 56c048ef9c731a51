"""Resize and Upsample against onnxruntime: every mode, coordinate transformation and
nearest rounding, antialias, exclude_outside, tf_crop_and_resize with its extrapolation
value, axes, keep_aspect_ratio_policy, N-D inputs, and the older opsets' semantics
(Resize-10/11, Upsample-7/9). One module per opset (the cases of one run share it).
What onnxruntime does not run (or samples off-spec) is checked against the onnx reference
(BEYOND_ONNXRUNTIME), and the decline reasons name the attribute."""

from __future__ import annotations

from pathlib import Path

import c_ir
import numpy as np
import pytest
from c_cases import Case, CaseResults, merged_model, node, rand, run_c, run_cases

from buildgen.backends.c import CBackend

RNG = np.random.default_rng(7)
F32, I64 = np.float32, np.int64


def _resize(
    name: str,
    x: tuple[int, ...],
    *,
    scales: list[float] | None = None,
    sizes: list[int] | None = None,
    roi: list[float] | None = None,
    **attrs: object,
) -> Case:
    weights: dict[str, np.ndarray] = {}
    inputs = ["x", "", "", ""]
    if roi is not None:
        inputs[1], weights["roi"] = "roi", np.array(roi, F32)
    if scales is not None:
        inputs[2], weights["scales"] = "scales", np.array(scales, F32)
    if sizes is not None:
        inputs[3], weights["sizes"] = "sizes", np.array(sizes, I64)
    while not inputs[-1]:
        inputs.pop()
    resize = node("Resize", inputs, ["y"], **attrs)
    return Case(name, [resize], {"x": rand(RNG, *x)}, ["y"], weights)


def _legacy(name: str, op: str, x: tuple[int, ...], scales: list[float], mode: str) -> Case:
    """Resize-10 / Upsample-9: scales is input 1."""
    weights = {"scales": np.array(scales, F32)}
    return Case(
        name, [node(op, ["x", "scales"], ["y"], mode=mode)], {"x": rand(RNG, *x)}, ["y"], weights
    )


COORDS = [
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def _nearest(rule: str, coord: str, scales: tuple[float, float] = (1.7, 0.6)) -> Case:
    return _resize(
        f"nearest_{rule}_{coord}",
        (1, 2, 5, 7),
        scales=[1, 1, *scales],
        **{"mode": "nearest", "nearest_mode": rule, "coordinate_transformation_mode": coord},
    )


OPSET_19 = [
    *(
        _nearest(rule, coord)
        for rule in NEAREST
        for coord in COORDS
        if coord != "half_pixel_symmetric"
    ),
    *(
        _resize(
            f"{mode}_{coord}",
            (2, 3, 5, 6),
            scales=[1, 1, 2.5, 0.5],
            mode=mode,
            coordinate_transformation_mode=coord,
        )
        for mode in ("linear", "cubic")
        for coord in COORDS
    ),
    *(
        _resize(
            f"{mode}_sizes_{coord}",
            (1, 2, 4, 9),
            sizes=[1, 2, 7, 4],
            mode=mode,
            coordinate_transformation_mode=coord,
        )
        for mode in ("nearest", "linear", "cubic")
        for coord in COORDS
    ),
    _resize("nearest_to_one", (1, 1, 5, 6), sizes=[1, 1, 1, 1], mode="nearest"),
    _resize(
        "linear_to_one_pytorch",
        (1, 1, 5, 6),
        sizes=[1, 1, 1, 3],
        mode="linear",
        coordinate_transformation_mode="pytorch_half_pixel",
    ),
    _resize(
        "cubic_to_one_pytorch",
        (1, 1, 5, 6),
        sizes=[1, 1, 1, 3],
        mode="cubic",
        coordinate_transformation_mode="pytorch_half_pixel",
    ),
    _resize(
        "cubic_a_exclude",
        (1, 2, 6, 5),
        scales=[1, 1, 0.7, 1.6],
        mode="cubic",
        cubic_coeff_a=-0.5,
        exclude_outside=1,
    ),
    _resize(
        "linear_antialias_down", (1, 2, 16, 13), scales=[1, 1, 0.3, 0.6], mode="linear", antialias=1
    ),
    _resize("cubic_antialias_down", (1, 2, 16, 13), sizes=[1, 2, 5, 4], mode="cubic", antialias=1),
    _resize(
        "cubic_antialias_mixed", (1, 1, 9, 8), scales=[1, 1, 0.5, 2.0], mode="cubic", antialias=1
    ),
    _resize(
        "cubic_antialias_exclude",
        (1, 1, 12, 10),
        scales=[1, 1, 0.4, 0.75],
        mode="cubic",
        antialias=1,
        exclude_outside=1,
    ),
    *(
        _resize(
            f"crop_{mode}",
            (1, 2, 6, 7),
            roi=[0, 0, 0.2, -0.1, 1, 1, 0.9, 1.3],
            sizes=[1, 2, 5, 6],
            mode=mode,
            extrapolation_value=3.5,
            coordinate_transformation_mode="tf_crop_and_resize",
        )
        for mode in ("nearest", "linear", "cubic")
    ),
    _resize(
        "crop_scales_axes",
        (2, 6, 7),
        roi=[0.1, 0.6, -0.2, 1.1],
        scales=[0.8, 1.5],
        axes=[2, 1],
        mode="linear",
        coordinate_transformation_mode="tf_crop_and_resize",
    ),
    _resize("axes_nearest_neg", (2, 3, 4, 5), scales=[2.0, 1.5], axes=[-1, 1], mode="nearest"),
    _resize("axes_linear_inner", (2, 5, 4, 3), sizes=[9, 2], axes=[1, 2], mode="linear"),
    *(
        _resize(
            f"policy_{policy}_{mode}",
            (1, 2, 6, 9),
            sizes=[4, 4],
            axes=[2, 3],
            keep_aspect_ratio_policy=policy,
            mode=mode,
        )
        for policy in ("not_larger", "not_smaller")
        for mode in ("nearest", "linear")
    ),
    _resize("linear_3d_vol", (1, 1, 3, 4, 5), scales=[1, 1, 2, 0.75, 1.5], mode="linear"),
    _resize("nearest_nhwc", (1, 4, 5, 3), scales=[1, 2, 3, 1], mode="nearest"),
    _resize("linear_all_axes", (2, 3, 4), scales=[1.5, 2.0, 0.5], mode="linear"),
    _resize("identity_linear", (1, 2, 3, 4), scales=[1, 1, 1, 1], mode="linear"),
    _resize("identity_nearest", (1, 2, 3, 4), sizes=[1, 2, 3, 4], mode="nearest"),
]

OPSET_11 = [
    _resize(
        "tf_half_pixel_for_nn",
        (1, 1, 4, 6),
        roi=[],
        scales=[1, 1, 1.5, 0.7],
        mode="nearest",
        coordinate_transformation_mode="tf_half_pixel_for_nn",
    ),
    _resize(
        "sizes_with_empty_scales",
        (1, 1, 4, 6),
        roi=[],
        scales=[],
        sizes=[1, 1, 6, 4],
        mode="linear",
    ),
]

OPSET_10 = [
    _legacy("resize10_nearest_up", "Resize", (1, 2, 3, 4), [1, 1, 2.5, 1.5], "nearest"),
    _legacy("resize10_nearest_down", "Resize", (1, 2, 7, 10), [1, 1, 0.6, 0.35], "nearest"),
    _legacy("resize10_linear", "Resize", (1, 2, 7, 10), [1, 1, 1.5, 0.6], "linear"),
]

OPSET_9 = [
    _legacy("upsample9_nearest", "Upsample", (1, 2, 3, 4), [1, 1, 2, 3], "nearest"),
    _legacy("upsample9_nearest_frac", "Upsample", (1, 2, 3, 4), [1, 1, 1.5, 2.5], "nearest"),
    _legacy("upsample9_linear", "Upsample", (1, 2, 3, 4), [1, 1, 2, 1.5], "linear"),
]

OPSET_7 = [
    Case(
        f"upsample7_{mode}",
        [node("Upsample", ["x"], ["y"], mode=mode, scales=[1.0, 1.0, 2.0, 1.5])],
        {"x": rand(RNG, 1, 2, 3, 4)},
        ["y"],
    )
    for mode in ("nearest", "linear")
]

# Checked against the onnx reference instead of onnxruntime: its CPU Resize takes linear
# and cubic on 2-D and 4-D inputs (linear also 3-D and 5-D, outer scales 1) only, and
# (1.32) samples nearest half_pixel_symmetric as half_pixel (no offset; the spec's and
# the reference's offset moves 7 -> 4 at scale 0.6 to [1, 2, 4, 5], onnxruntime gives
# [0, 2, 4, 5]).
BEYOND_ONNXRUNTIME = [
    # (scales whose source coordinates are nowhere near a rounding tie: the reference
    # computes them in double precision, onnxruntime and buildgen in single)
    *(_nearest(rule, "half_pixel_symmetric", (1.35, 0.65)) for rule in NEAREST),
    _resize("linear_1d", (11,), scales=[1.75], mode="linear"),
    _resize("linear_5d_all_axes", (2, 3, 3, 4, 5), scales=[1.5, 1, 2, 0.75, 0.5], mode="linear"),
    _resize("cubic_1d", (9,), sizes=[14], mode="cubic"),
    _resize("cubic_3d", (4, 5, 6), sizes=[3, 8, 6], mode="cubic", exclude_outside=1),
    _resize("cubic_5d_batch", (2, 2, 3, 4, 5), sizes=[2, 2, 5, 3, 5], mode="cubic"),
    _resize(
        "cubic_5d_antialias",
        (1, 2, 8, 9, 4),
        scales=[1, 1, 0.5, 0.625, 1.5],
        mode="cubic",
        antialias=1,
    ),
]

SUITES = {19: OPSET_19, 11: OPSET_11, 10: OPSET_10, 9: OPSET_9, 7: OPSET_7}
CASES = [(opset, case) for opset, cases in SUITES.items() for case in cases]


def _reference_results(cases: list[Case], opset: int, workdir: Path) -> CaseResults:
    from onnx.reference import ReferenceEvaluator

    model = merged_model(cases, opset)
    feeds = {f"{c.name}.{k}": v for c in cases for k, v in c.feeds.items()}
    actual, source = run_c(model, feeds, cases, workdir)
    values = ReferenceEvaluator(model).run(None, feeds)
    expected = {o.name: np.asarray(v) for o, v in zip(model.graph.output, values, strict=True)}
    return CaseResults(expected, actual, source)


@pytest.fixture(scope="module")
def results(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> dict[int, CaseResults]:
    root = tmp_path_factory.mktemp("c_resize")
    return {
        opset: run_cases(cases, opset, root / f"opset{opset}") for opset, cases in SUITES.items()
    }


@pytest.mark.parametrize(
    ("opset", "case"), CASES, ids=lambda v: v.name if isinstance(v, Case) else str(v)
)
def test_matches_onnxruntime(results: dict[int, CaseResults], opset: int, case: Case) -> None:
    results[opset].check(case)


def test_tables_are_static_and_identity_is_a_copy(results: dict[int, CaseResults]) -> None:
    text = results[19].source
    assert "static const int64_t tap3[" in text and "static const float weight3[" in text
    assert "static const int64_t src2[" in text  # nearest: one index table per resized axis
    assert "memcpy(Y, X, 96);" in text  # the identity cases copy


@pytest.fixture(scope="module")
def reference_results(c_toolchain: None, tmp_path_factory: pytest.TempPathFactory) -> CaseResults:
    return _reference_results(BEYOND_ONNXRUNTIME, 19, tmp_path_factory.mktemp("c_resize_ref"))


@pytest.mark.parametrize("case", BEYOND_ONNXRUNTIME, ids=lambda c: c.name)
def test_matches_onnx_reference(reference_results: CaseResults, case: Case) -> None:
    reference_results.check(case)


def test_decline_reasons_name_the_attribute() -> None:
    f32, i64 = c_ir.F32, c_ir.I64
    types = {
        "x": (f32, (1, 1, 4, 4)),
        "roi": (f32, (8,)),
        "scales": (f32, (4,)),
        "sizes": (i64, (4,)),
        "y": (f32, (1, 1, 8, 8)),
    }

    def reason(inputs: list[str], weights: tuple[str, ...], opset: int = 19, **attrs: object):
        node = c_ir.ir_node("Resize", inputs, ["y"], **attrs)
        runtime = [t for t in inputs if t and t not in weights]
        graph = c_ir.ir_graph([node], types, runtime, ["y"], weights, opset=opset)
        return CBackend().decline_reason(node, graph)

    given = ("scales", "sizes", "roi")
    assert reason(["x", "", "scales"], given, mode="linear") is None
    assert reason(["x", "", "scales"], given, mode="xyz") == (
        "Resize mode=xyz not supported (nearest/linear/cubic)"
    )
    assert "coordinate_transformation_mode=tf_half_pixel" in (
        reason(["x", "", "scales"], given, coordinate_transformation_mode="tf_half_pixel") or ""
    )
    assert "nearest_mode=up" in (reason(["x", "", "scales"], given, nearest_mode="up") or "")
    assert "keep_aspect_ratio_policy=fit" in (
        reason(["x", "", "", "sizes"], given, keep_aspect_ratio_policy="fit") or ""
    )
    assert reason(["x", "", "scales"], ()) == (
        "Resize with a run-time 'scales' input not supported (must be a constant)"
    )
    # a run-time roi matters only to tf_crop_and_resize
    assert reason(["x", "roi", "scales"], ("scales",)) is None
    crop = {"coordinate_transformation_mode": "tf_crop_and_resize"}
    assert "run-time 'roi'" in (reason(["x", "roi", "scales"], ("scales",), **crop) or "")
    assert "without a roi" in (reason(["x", "", "scales"], given, **crop) or "")
    assert reason(["x", "", "scales", "sizes"], given) == (
        "Resize needs exactly one of scales and sizes"
    )
    # Resize-10: scales is input 1, and there is no cubic
    assert reason(["x", "scales"], given, opset=10, mode="cubic") == (
        "Resize mode=cubic not supported (nearest/linear)"
    )
