"""Where each output index along one resized axis reads the input: the coordinate
transformation, nearest rounding and the linear / cubic (optionally antialiased) filter
taps of Resize and Upsample. Plain Python at code generation time; resize.py writes the
results into C tables.

Source coordinates are computed in float32 step by step as onnxruntime does, so rounding
ties fall the same way; align_corners, pytorch_half_pixel and tf_crop_and_resize use the
integer output length (the spec's `length_resized`; onnx's reference implementation uses
scale * input length instead).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from buildgen.backends.c.ops.common import float_attr, int_attr, str_attr
from buildgen.ir import Node

MODES = ("nearest", "linear", "cubic")
COORDINATE_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nn",  # opset 11 only
    "tf_crop_and_resize",
)
# nearest_mode; Resize-10 and Upsample have none and round "simple" (_nearest_index)
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
POLICIES = ("stretch", "not_larger", "not_smaller")


@dataclass(frozen=True)
class Sampling:
    """How one node samples, from its attributes (with each opset's defaults)."""

    mode: str  # nearest | linear | cubic
    coordinates: str  # coordinate_transformation_mode
    nearest: str  # nearest_mode, or "simple"
    cubic_a: float
    antialias: bool
    exclude_outside: bool
    extrapolation: float  # the value outside the roi (tf_crop_and_resize)
    policy: str  # keep_aspect_ratio_policy


def sampling(node: Node, opset: int) -> Sampling:
    legacy = node.op == "Upsample" or opset < 11
    return Sampling(
        mode=str_attr(node, "mode", "nearest"),
        coordinates="asymmetric"
        if legacy
        else str_attr(node, "coordinate_transformation_mode", "half_pixel"),
        nearest="simple" if legacy else str_attr(node, "nearest_mode", "round_prefer_floor"),
        cubic_a=float_attr(node, "cubic_coeff_a", -0.75),
        antialias=bool(int_attr(node, "antialias", 0)),
        exclude_outside=bool(int_attr(node, "exclude_outside", 0)),
        extrapolation=float_attr(node, "extrapolation_value", 0.0),
        policy=str_attr(node, "keep_aspect_ratio_policy", "stretch"),
    )


@dataclass(frozen=True)
class AxisResize:
    """One axis: its lengths, the scale its coordinates use and its roi (start, end)."""

    size_in: int
    size_out: int
    scale: float
    roi: tuple[float, float] = (0.0, 1.0)


@dataclass(frozen=True)
class Taps:
    """Per output index along one axis: the source indices and their weights (all rows
    of one length), and whether the index lies outside the roi (extrapolated)."""

    size_in: int
    index: tuple[tuple[int, ...], ...]
    weight: tuple[tuple[float, ...], ...]
    outside: tuple[bool, ...]

    @property
    def is_identity(self) -> bool:
        """Output index j reads source index j, whole."""
        if self.size_in != len(self.index) or any(self.outside):
            return False
        for j, (idx, w) in enumerate(zip(self.index, self.weight, strict=True)):
            on_j = sum(wk for ik, wk in zip(idx, w, strict=True) if ik == j)
            off_j = sum(abs(wk) for ik, wk in zip(idx, w, strict=True) if ik != j)
            if abs(on_j - 1.0) > 1e-9 or off_j > 1e-12:
                return False
        return True


def source_coordinate(s: Sampling, axis: AxisResize, j: int) -> float:
    """Where output index `j` falls in the input (coordinate_transformation_mode).

    Computed in float32, operation by operation as onnxruntime does: whether a
    coordinate lands just below or on an integer decides nearest indices.
    """
    f = np.float32
    x, scale = f(j), f(axis.scale)
    n_in, n_out = f(axis.size_in), f(axis.size_out)
    half = f(0.5)
    mode = s.coordinates
    if mode == "half_pixel":
        value = (x + half) / scale - half
    elif mode == "half_pixel_symmetric":  # (onnxruntime adds in double precision)
        adjustment = n_out / (scale * n_in)
        offset = n_in / f(2) * (f(1) - adjustment)
        value = f(float(offset) + (j + 0.5) / float(scale) - 0.5)
    elif mode == "pytorch_half_pixel":
        value = (x + half) / scale - half if axis.size_out > 1 else f(0)
    elif mode == "align_corners":
        value = x * (n_in - f(1)) / (n_out - f(1)) if axis.size_out > 1 else f(0)
    elif mode == "asymmetric":
        value = x / scale
    elif mode == "tf_half_pixel_for_nn":
        value = (x + half) / scale
    else:  # tf_crop_and_resize
        start, end = f(axis.roi[0]), f(axis.roi[1])
        if axis.size_out == 1:
            value = half * (start + end) * (n_in - f(1))
        else:
            value = start * (n_in - f(1)) + x * (end - start) * (n_in - f(1)) / (n_out - f(1))
    return float(value)


def _nearest_index(s: Sampling, x: float, scale: float) -> int:
    low = math.floor(x)
    frac = x - low
    rule = s.nearest
    if rule == "simple":
        rule = "ceil" if scale < 1 else "floor"
    if rule == "round_prefer_floor":
        return low if frac <= 0.5 else low + 1
    if rule == "round_prefer_ceil":
        return low if frac < 0.5 else low + 1
    if rule == "floor":
        return low
    return low if frac == 0 else low + 1  # ceil


def _cubic(d: float, a: float) -> float:
    """The cubic convolution kernel (Keys 1981) with coefficient a."""
    d = abs(d)
    if d <= 1:
        return ((a + 2) * d - (a + 3)) * d * d + 1
    if d < 2:
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return 0.0


def _filter_taps(s: Sampling, x: float, scale: float) -> tuple[list[int], list[float]]:
    """Unclamped source indices around x and their weights (linear or cubic). With
    antialias and scale < 1 the filter is stretched by 1/scale and normalized."""
    low = math.floor(x)
    support = 1 if s.mode == "linear" else 2
    if s.antialias and scale < 1:
        first = math.floor(-support / scale) + 1
        count = 2 - 2 * first
        index = [low + first + k for k in range(count)]
        if s.mode == "linear":
            raw = [max(0.0, 1 - abs((i - x) * scale)) for i in index]
        else:
            raw = [_cubic((i - x) * scale, s.cubic_a) for i in index]
        total = sum(raw)
        return index, [w / total for w in raw]
    index = [low - support + 1 + k for k in range(2 * support)]
    if s.mode == "linear":
        return index, [1 - abs(i - x) for i in index]
    return index, [_cubic(i - x, s.cubic_a) for i in index]


def axis_taps(s: Sampling, axis: AxisResize) -> Taps:
    """The taps of every output index along one axis; indices are clamped into the input
    (edge padding), after exclude_outside dropped the ones beyond it."""
    last = axis.size_in - 1
    rows_i, rows_w, outside = [], [], []
    for j in range(axis.size_out):
        x = source_coordinate(s, axis, j)
        outside.append(s.coordinates == "tf_crop_and_resize" and not 0 <= x <= last)
        if s.mode == "nearest":
            index, weight = [_nearest_index(s, x, axis.scale)], [1.0]
        else:
            index, weight = _filter_taps(s, x, axis.scale)
            if s.exclude_outside:
                weight = [w if 0 <= i <= last else 0.0 for i, w in zip(index, weight, strict=True)]
                total = sum(weight)
                weight = [w / total if total else 0.0 for w in weight]
        rows_i.append(tuple(min(max(i, 0), last) for i in index))
        rows_w.append(tuple(weight))
    return Taps(axis.size_in, tuple(rows_i), tuple(rows_w), tuple(outside))
