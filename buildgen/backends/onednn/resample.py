"""Resize and Upsample as oneDNN's resampling primitive, for the ONNX variants whose sampling
oneDNN reproduces exactly; the others decline and run on the c host.

oneDNN resamples dims 2 onward of an [N, C, D/H/W] tensor, each axis on its own, with the
scale its sizes imply: output index j reads the source coordinate
x = (j + 0.5) * in / out - 0.5 (float32; cpu/resampling_utils.hpp), `nearest` takes
roundf(x) (ties away from zero), `linear` weights floor(x) and the next index (both clamped
to the axis). ONNX's variants differ by coordinate_transformation_mode, nearest_mode and the
scale given (which need not be out / in). A variant is taken when, on every resized axis of
the node's static shapes, its ONNX index table (nearest) or weight table (linear) equals
oneDNN's: half_pixel (and pytorch_half_pixel, half_pixel_symmetric) linear resizing, and
nearest resizing wherever the rounding agrees (e.g. Upsample by an integer factor, whose
asymmetric floor picks what oneDNN's half-pixel rounding picks).

decline_reason checks with the constant scales the graph carries (Graph.constant: the
partition stage loads constants.bin), or with the scale out / in (what `sizes` gives) when
it carries none; codegen checks again with the scales and fails with a hint if they disagree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from buildgen.errors import error
from buildgen.ir import Graph, Node

_F = np.float32
_HALF_PIXEL = ("half_pixel", "pytorch_half_pixel", "half_pixel_symmetric")
_TABLE_MODES = (*_HALF_PIXEL, "asymmetric", "tf_half_pixel_for_nn")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_TOLERANCE = 1e-5  # linear weights: float32 rounding of one formula against the other


def _legacy(node: Node, graph: Graph) -> bool:
    """Upsample and Resize-10: asymmetric coordinates, onnxruntime's own nearest rounding."""
    return node.op == "Upsample" or graph.opset < 11


def _str(node: Node, name: str, default: str) -> str:
    value = node.attr(name, default)
    return value if isinstance(value, str) else default


def _modes(node: Node, graph: Graph) -> tuple[str, str, str]:
    """(mode, coordinate_transformation_mode, nearest_mode or 'simple')."""
    mode = _str(node, "mode", "nearest")
    if _legacy(node, graph):
        return mode, "asymmetric", "simple"
    return (mode, _str(node, "coordinate_transformation_mode", "half_pixel"),
            _str(node, "nearest_mode", "round_prefer_floor"))


def _operand(node: Node, graph: Graph, what: str) -> str:
    """The input named `what` (roi, scales, sizes) when the op's opset has it and it is
    given (Resize-11 passes an empty scales beside sizes), else ""."""
    index = {"scales": 1} if _legacy(node, graph) else {"roi": 1, "scales": 2, "sizes": 3}
    position = index.get(what)
    if position is None or position >= len(node.inputs) or not node.inputs[position]:
        return ""
    name = node.inputs[position]
    return name if graph.type_of(name).numel > 0 else ""


# ---- the two samplings, per output index of one axis ----


def _onnx_coordinate(coords: str, j: int, size_in: int, size_out: int, scale: float) -> float:
    """onnxruntime's source coordinate (float32, operation by operation)."""
    x, s = _F(j), _F(scale)
    if coords == "asymmetric":
        return float(x / s)
    if coords == "tf_half_pixel_for_nn":
        return float((x + _F(0.5)) / s)
    if coords == "pytorch_half_pixel" and size_out <= 1:
        return 0.0
    half = (x + _F(0.5)) / s - _F(0.5)
    if coords == "half_pixel_symmetric":
        adjustment = _F(size_out) / (s * _F(size_in))
        center = _F(size_in) / _F(2)
        return float(center * (_F(1) - adjustment) + half)
    return float(half)


def _onnx_round(nearest: str, x: float, scale: float) -> int:
    if nearest == "simple":  # Resize-10 / Upsample in onnxruntime
        return math.ceil(x) if scale < 1 else int(x)
    if nearest == "floor":
        return math.floor(x)
    if nearest == "ceil":
        return math.ceil(x)
    if nearest == "round_prefer_floor" and x == int(x) + 0.5:
        return math.floor(x)
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)  # std::round


def _dnnl_coordinate(j: int, size_in: int, size_out: int) -> float:
    return float((_F(j) + _F(0.5)) * _F(size_in) / _F(size_out) - _F(0.5))


def _clamp(i: int, size: int) -> int:
    return min(max(i, 0), size - 1)


def _linear_taps(x: float, size_in: int) -> dict[int, float]:
    """Source index -> weight of linear sampling at x, clamped to the axis."""
    x = min(max(x, 0.0), float(size_in - 1))
    left = int(x)
    right = min(left + 1, size_in - 1)
    taps: dict[int, float] = {}
    for index, w in ((left, 1.0 - (x - left)), (right, x - left)):
        taps[index] = taps.get(index, 0.0) + w
    return {i: w for i, w in taps.items() if abs(w) > _TOLERANCE}


def _axis_agrees(mode: str, coords: str, nearest: str, size_in: int, size_out: int,
                 scale: float) -> bool:
    for j in range(size_out):
        ours = _onnx_coordinate(coords, j, size_in, size_out, scale)
        theirs = _dnnl_coordinate(j, size_in, size_out)
        if mode == "nearest":
            if _clamp(_onnx_round(nearest, ours, scale), size_in) != _clamp(
                    _onnx_round("round_prefer_ceil", theirs, 1.0), size_in):
                return False
            continue
        a, b = _linear_taps(ours, size_in), _linear_taps(theirs, size_in)
        if a.keys() != b.keys() or any(abs(a[i] - b[i]) > _TOLERANCE for i in a):
            return False
    return True


def _variant(node: Node, mode: str, coords: str, nearest: str, legacy: bool) -> str:
    """The attribute that decides the sampling, for a reason."""
    if legacy:
        return f"{node.op} mode={mode} (asymmetric coordinates)"
    if coords not in _HALF_PIXEL or mode == "linear":
        return f"{node.op} coordinate_transformation_mode={coords}"
    return f"{node.op} nearest_mode={nearest}"


def sampling_reason(node: Node, graph: Graph, scales: Sequence[float] | None) -> str | None:
    """None when oneDNN samples as the node does at its shapes with `scales` (per axis; None:
    out / in, the sizes' scale), else why not."""
    mode, coords, nearest = _modes(node, graph)
    legacy = _legacy(node, graph)
    x = graph.type_of(node.inputs[0]).shape
    y = graph.type_of(node.outputs[0]).shape
    for axis in (0, 1):
        if scales is not None and scales[axis] != 1.0 and x[axis] > 1:
            return (f"{node.op} scale {scales[axis]:g} on axis {axis}: oneDNN resamples dims 2 "
                    "onward")
    for axis in range(2, len(x)):
        scale = scales[axis] if scales is not None else float(_F(y[axis]) / _F(x[axis]))
        if not _axis_agrees(mode, coords, nearest, x[axis], y[axis], scale):
            what = _variant(node, mode, coords, nearest, legacy)
            if scales is not None and coords in _HALF_PIXEL and mode == "linear":
                what = f"{node.op} scale {scale:g} (not out / in = {y[axis]} / {x[axis]})"
            return (f"{what}: oneDNN resampling (half-pixel centres, nearest ties rounded up) "
                    f"samples other source pixels along axis {axis} ({x[axis]} -> {y[axis]})")
    return None


def resample_reason(node: Node, graph: Graph) -> str | None:
    """decline_reason of a Resize or Upsample node (its dtypes are checked by the caller)."""
    mode, coords, nearest = _modes(node, graph)
    if mode not in ("nearest", "linear"):
        return f"{node.op} mode={mode}: oneDNN resampling has no such mode (nearest, linear)"
    if not _legacy(node, graph):
        if coords not in _TABLE_MODES:
            return (f"{node.op} coordinate_transformation_mode={coords}: oneDNN resampling "
                    "has no such mode")
        if node.attr("antialias", 0) != 0:
            return f"{node.op} antialias=1: oneDNN resampling does not antialias"
        policy = _str(node, "keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            return (f"{node.op} keep_aspect_ratio_policy={policy}: oneDNN resampling scales "
                    "each axis by its own out / in")
        if mode == "nearest" and nearest not in _NEAREST:
            return f"{node.op} nearest_mode={nearest} is not an ONNX mode"
    x = graph.type_of(node.inputs[0]).shape
    y = graph.type_of(node.outputs[0]).shape
    if not 3 <= len(x) <= 5:
        return f"{node.op} of rank {len(x)} (oneDNN resamples the 1-D to 3-D spatial dims)"
    if x[:2] != y[:2]:
        return f"{node.op} of the batch or channel dim (oneDNN resamples dims 2 onward)"
    if any(d == 0 for d in (*x, *y)):
        return f"{node.op} of an empty tensor"
    for what in ("scales", "sizes"):
        name = _operand(node, graph, what)
        if name and not graph.is_weight(name):
            return f"{node.op} with run-time {what}"
    return sampling_reason(node, graph, node_scales(node, graph, graph.constant_values))


def _attr_scales(node: Node) -> list[float]:
    value = node.attr("scales", ())
    assert isinstance(value, tuple)
    return [float(v) for v in value]


def node_scales(node: Node, graph: Graph, weights: Mapping[str, np.ndarray] | None
                ) -> list[float] | None:
    """The node's per-axis scales from its constants (None: given as sizes, out / in, or
    unknown because `weights` lacks them)."""
    if node.op == "Upsample" and node.has_attr("scales"):
        return _attr_scales(node)
    name = _operand(node, graph, "scales")
    if not name or weights is None or name not in weights:
        return None
    values = [float(v) for v in np.asarray(weights[name], dtype=np.float32).reshape(-1)]
    rank = graph.type_of(node.inputs[0]).rank
    axes = node.attr("axes", tuple(range(rank)))
    assert isinstance(axes, tuple)
    scales = [1.0] * rank
    for axis, value in zip(axes, values, strict=True):
        assert isinstance(axis, int)
        scales[axis % rank] = value
    return scales


def check_sampling(node: Node, graph: Graph, weights: Mapping[str, np.ndarray] | None) -> str:
    """The oneDNN resampling algorithm of a node decline_reason took, after checking its
    constant scales (an error when they make ONNX sample elsewhere)."""
    name = _operand(node, graph, "scales")
    if name and (weights is None or name not in weights):
        raise error(f"{node.op} '{node.name}': its scales '{name}' are needed at codegen, "
                    "but no weights were given")
    reason = sampling_reason(node, graph, node_scales(node, graph, weights))
    if reason is not None:
        raise error(f"onednn backend cannot run node '{node.name}' ({node.op}): {reason}",
                    hint=f"pin '{node.name}' to c in the manifest; the c host runs every variant")
    nearest = _modes(node, graph)[0] == "nearest"
    return "dnnl_resampling_nearest" if nearest else "dnnl_resampling_linear"
