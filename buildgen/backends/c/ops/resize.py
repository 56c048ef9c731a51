"""Resize (opsets 10 to 19) and Upsample (7, 9) of float32 tensors: nearest, N-linear and
N-cubic resampling, with scales, sizes and roi given as constants.

Every resized axis is resampled on its own: each output index along it reads a few source
indices ("taps") with weights (resize_taps.py). Shapes are static, so those tables are
computed at code generation time and written into the kernel as static const arrays; the
C only gathers (nearest) or sums the taps (linear, cubic: one pass per resized axis,
through a workspace between passes).

Semantics follow the ONNX spec's text; where onnx's reference implementation departs from
it (align_corners with a fractional output length) they follow the text and onnxruntime.
Resize-10 and Upsample sample "asymmetric" and round as onnxruntime does (floor when
upsampling an axis, ceil when downsampling it). antialias and exclude_outside change
linear and cubic only. (onnxruntime 1.32 samples nearest half_pixel_symmetric like
half_pixel; here it keeps the spec's offset.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from math import prod

import numpy as np

from buildgen.backends.c.cwriter import Code, contiguous_strides, float_literal, linear
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import (
    FLOAT,
    constant_reason,
    dtype_reason,
    input_at,
    ints_attr,
    normalize_axis,
)
from buildgen.backends.c.ops.resize_taps import (
    COORDINATE_MODES,
    MODES,
    NEAREST_MODES,
    POLICIES,
    AxisResize,
    Sampling,
    Taps,
    axis_taps,
    sampling,
)
from buildgen.backends.c.registry import OpEntry
from buildgen.errors import error
from buildgen.ir import Graph, Node

# ---- scales, sizes, axes and roi -> one AxisResize per axis of X ----


def _operands(node: Node, opset: int) -> dict[str, int]:
    """The input index of roi, scales and sizes (those the op's opset has)."""
    if node.op == "Upsample" or opset < 11:
        return {"scales": 1}
    return {"roi": 1, "scales": 2, "sizes": 3}


def _operand(node: Node, opset: int, what: str) -> str:
    """The tensor given as `what`, "" when absent."""
    index = _operands(node, opset).get(what)
    return input_at(node, index) if index is not None else ""


def _given(name: str, graph: Graph) -> bool:
    """An operand is given when named and non-empty (Resize-11 passes an empty scales
    tensor beside sizes)."""
    return bool(name) and graph.type_of(name).numel > 0


def resize_axes(ctx: LowerContext, node: Node) -> list[AxisResize]:
    graph = ctx.graph
    s = sampling(node, graph.opset)
    in_shape, out_shape = ctx.shape(node.inputs[0]), ctx.shape(node.outputs[0])
    rank = len(in_shape)
    where = f"{node.op} '{node.name}'"
    axes = [normalize_axis(a, rank) for a in ints_attr(node, "axes", range(rank))]
    scales_in, sizes_in = (_operand(node, graph.opset, w) for w in ("scales", "sizes"))
    scales = [1.0] * rank
    if _given(scales_in, graph):
        values = [float(v) for v in ctx.values(scales_in, node)]
        if len(values) != len(axes) or any(v <= 0 for v in values):
            raise error(f"{where}: scales {values} must be {len(axes)} positive numbers")
        for a, v in zip(axes, values, strict=True):
            scales[a] = v
    elif node.op == "Upsample" and node.has_attr("scales"):  # Upsample-7
        scales = [float(v) for v in node.attr("scales", ())]  # type: ignore[union-attr]
        if len(scales) != rank or any(v <= 0 for v in scales):
            raise error(f"{where}: scales {scales} must be {rank} positive numbers")
    elif _given(sizes_in, graph):
        sizes = ctx.ints(sizes_in, node)
        if len(sizes) != len(axes):
            raise error(f"{where}: sizes {list(sizes)} must have {len(axes)} values")
        # in float32, as onnxruntime computes them
        ratios = [
            float(np.float32(n) / np.float32(in_shape[a])) for a, n in zip(axes, sizes, strict=True)
        ]
        for a, r in zip(axes, ratios, strict=True):
            scales[a] = r
        if s.policy != "stretch":
            kept = min(ratios) if s.policy == "not_larger" else max(ratios)
            for a in axes:
                scales[a] = kept
    else:
        raise error(f"{where}: neither scales nor sizes given")
    rois = [(0.0, 1.0)] * rank
    if s.coordinates == "tf_crop_and_resize":
        roi = [float(v) for v in ctx.values(_operand(node, graph.opset, "roi"), node)]
        if len(roi) != 2 * len(axes):
            raise error(f"{where}: roi has {len(roi)} values, expected {2 * len(axes)}")
        for k, a in enumerate(axes):
            rois[a] = (roi[k], roi[len(axes) + k])
    return [AxisResize(in_shape[d], out_shape[d], scales[d], rois[d]) for d in range(rank)]


# ---- C ----


def _static_table(code: Code, ctype: str, name: str, rows: Sequence[Sequence[str]]) -> None:
    """`static const <ctype> name[N]` (rows of one item) or `name[N][K]`, wrapped."""
    width = len(rows[0])
    items = [r[0] if width == 1 else "{" + ", ".join(r) + "}" for r in rows]
    dims = f"[{len(rows)}]" + ("" if width == 1 else f"[{width}]")
    head = f"static const {ctype} {name}{dims} = {{"
    lines, current = [], head
    for k, item in enumerate(items):
        piece = item + ("," if k < len(items) - 1 else "")
        if len(current) + len(piece) + 1 > 96 and current != head:
            lines.append(current.rstrip())
            current = "    "
        current += piece + " "
    lines.append(current.rstrip() + "};")
    code.extend(lines)


def _lower_nearest(
    ctx: LowerContext, node: Node, s: Sampling, axes: list[AxisResize]
) -> tuple[Code, int]:
    """Y[i] = X[source index of i]: one loop per resized axis, one per run of the others."""
    in_strides = contiguous_strides(ctx.shape(node.inputs[0]))
    code = Code()
    # (extent, input stride, table name; "" for a run of axes that keep their samples)
    loops: list[tuple[int, int, str]] = []
    outside_tables = []
    for d, axis in enumerate(axes):
        taps = axis_taps(s, axis)
        if taps.is_identity:
            if loops and not loops[-1][2]:
                loops[-1] = (loops[-1][0] * axis.size_out, in_strides[d], "")
            else:
                loops.append((axis.size_out, in_strides[d], ""))
            continue
        name = f"src{d}"
        code.line(
            f"/* axis {d}: {axis.size_in} -> {axis.size_out}, the source index of each output */"
        )
        if any(taps.outside):
            code.line(f"/* (-1: outside the roi, the output is {s.extrapolation}) */")
            outside_tables.append(name)
        pairs = zip(taps.index, taps.outside, strict=True)
        rows = [("-1" if out else str(index[0]),) for index, out in pairs]
        _static_table(code, "int64_t", name, rows)
        loops.append((axis.size_out, in_strides[d], name))
    loops = [loop for loop in loops if loop[0] > 1 or loop[2]]
    if not any(table for _, _, table in loops):
        return _copy(ctx, node), 0
    extents = [extent for extent, _, _ in loops]
    with code.loops(extents) as idx:
        terms, tests = [], []
        for counter, (_, stride, table) in zip(idx, loops, strict=True):
            at = f"{table}[{counter}]" if table else counter
            terms.append(at if stride == 1 else f"{at} * {stride}")
            if table in outside_tables:
                tests.append(f"{at} < 0")
        read = f"X[{' + '.join(terms)}]"
        if tests:
            read = f"{' || '.join(tests)} ? {float_literal(s.extrapolation)} : {read}"
        code.line(f"Y[{linear(idx, contiguous_strides(extents))}] = {read};")
    return code, 0


def _copy(ctx: LowerContext, node: Node) -> Code:
    code = Code()
    nbytes = ctx.graph.type_of(node.outputs[0]).nbytes
    code.line(f"memcpy(Y, X, {nbytes}); /* no axis changes its samples */")
    return code


@contextmanager
def _outer_loop(code: Code, extent: int) -> Iterator[str]:
    """`for (o ...)` unless extent is 1; yields the counter, "0" without a loop."""
    if extent == 1:
        yield "0"
    else:
        with code.block(f"for (int64_t o = 0; o < {extent}; ++o)"):
            yield "o"


def _plus(counter: str, step: int) -> str:
    return "" if counter == "0" else f" + {counter} * {step}"


def _emit_pass(
    code: Code, s: Sampling, d: int, taps: Taps, shape: Sequence[int], src: str, dst: str
) -> None:
    """dst = src resampled along axis d (`shape` is src's shape): every output row is the
    weighted sum of its taps' rows."""
    outer, inner = prod(shape[:d]), prod(shape[d + 1 :])
    n_in, n_out, width = shape[d], len(taps.index), len(taps.index[0])
    extrapolate = any(taps.outside)
    fill = float_literal(s.extrapolation)
    code.line(f"/* axis {d}: {n_in} -> {n_out}, {width} {s.mode} taps per output index */")
    _static_table(code, "int64_t", f"tap{d}", [[str(i) for i in r] for r in taps.index])
    _static_table(code, "float", f"weight{d}", [[float_literal(w) for w in r] for r in taps.weight])
    if extrapolate:
        code.line(f"/* 1: outside the roi, the output is {s.extrapolation} */")
        _static_table(code, "uint8_t", f"outside{d}", [[str(int(o))] for o in taps.outside])
    with _outer_loop(code, outer) as o:
        code.line(f"const float *x = {src}{_plus(o, n_in * inner)};")
        code.line(f"float *y = {dst}{_plus(o, n_out * inner)};")
        with code.block(f"for (int64_t j = 0; j < {n_out}; ++j)"):
            if inner == 1:
                if extrapolate:
                    code.line(f"if (outside{d}[j]) {{ y[j] = {fill}; continue; }}")
                code.line("float acc = 0.0f;")
                with code.block(f"for (int64_t k = 0; k < {width}; ++k)"):
                    code.line(f"acc += weight{d}[j][k] * x[tap{d}[j][k]];")
                code.line("y[j] = acc;")
            else:
                code.line(f"float *row = y + j * {inner};")
                if extrapolate:
                    with code.block(f"if (outside{d}[j])"):
                        code.line(f"for (int64_t i = 0; i < {inner}; ++i) row[i] = {fill};")
                        code.line("continue;")
                code.line(f"for (int64_t i = 0; i < {inner}; ++i) row[i] = 0.0f;")
                with code.block(f"for (int64_t k = 0; k < {width}; ++k)"):
                    code.line(f"const float w = weight{d}[j][k];")
                    code.line(f"const float *from = x + tap{d}[j][k] * {inner};")
                    code.line(f"for (int64_t i = 0; i < {inner}; ++i) row[i] += w * from[i];")


def _lower_separable(
    ctx: LowerContext, node: Node, s: Sampling, axes: list[AxisResize]
) -> tuple[Code, int]:
    """One pass per resized axis, the most shrinking first (less data for the later ones);
    the passes before the last write into two alternating workspace buffers, t0 and t1."""
    passes = [(d, axis_taps(s, a)) for d, a in enumerate(axes)]
    passes = [(d, taps) for d, taps in passes if not taps.is_identity]
    passes.sort(key=lambda p: (axes[p[0]].size_out / axes[p[0]].size_in, p[0]))
    if not passes:
        return _copy(ctx, node), 0
    shape = list(ctx.shape(node.inputs[0]))
    shapes = []  # the shape each pass reads
    for d, taps in passes:
        shapes.append(tuple(shape))
        shape[d] = len(taps.index)
    between = [prod(sh) for sh in shapes[1:]]  # the elements of each intermediate
    buffers = [max(between[i::2]) for i in (0, 1) if i < len(between)]
    code = Code()
    if buffers:
        code.line("float *const t0 = (float *)ws;")
    if len(buffers) > 1:
        code.line(f"float *const t1 = t0 + {buffers[0]};")
    src = "X"
    for k, (d, taps) in enumerate(passes):
        dst = "Y" if k == len(passes) - 1 else f"t{k % 2}"
        if len(passes) == 1:
            _emit_pass(code, s, d, taps, shapes[k], src, dst)
            break
        body = Code()  # each pass in its own block: its tables and pointers are local
        _emit_pass(body, s, d, taps, shapes[k], src, dst)
        code.line("{")
        code.extend(body.lines)
        code.line("}")
        src = dst
    return code, 4 * sum(buffers)


def _lower_resize(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    s = sampling(node, ctx.graph.opset)
    axes = resize_axes(ctx, node)
    lower = _lower_nearest if s.mode == "nearest" else _lower_separable
    code, workspace = lower(ctx, node, s, axes)
    params = [Param("X", node.inputs[0], "float"), Param("Y", node.outputs[0], "float", True)]
    if workspace:
        params.append(Param("ws", "", "void"))
    return Kernel(kernel_stem(nodes), tuple(nodes), tuple(params), code.lines, workspace=workspace)


def _check_resize(node: Node, graph: Graph) -> str | None:
    s = sampling(node, graph.opset)
    if node.op == "Upsample" or graph.opset < 11:  # nothing but the mode to choose
        choices: list[tuple[str, str, Sequence[str]]] = [("mode", s.mode, MODES[:2])]
    else:
        choices = [
            ("mode", s.mode, MODES),
            ("coordinate_transformation_mode", s.coordinates, COORDINATE_MODES),
            ("keep_aspect_ratio_policy", s.policy, POLICIES),
        ]
        if s.mode == "nearest":
            choices.append(("nearest_mode", s.nearest, NEAREST_MODES))
    for attr, value, allowed in choices:
        if value not in allowed:
            return f"{node.op} {attr}={value} not supported ({'/'.join(allowed)})"
    reason = dtype_reason(node, graph, FLOAT, (node.inputs[0], *node.outputs))
    for what, index in _operands(node, graph.opset).items():
        if what != "roi" or s.coordinates == "tf_crop_and_resize":
            reason = reason or constant_reason(node, graph, index, what)
    if reason:
        return reason
    if s.coordinates == "tf_crop_and_resize" and not _given(
        _operand(node, graph.opset, "roi"), graph
    ):
        return f"{node.op} coordinate_transformation_mode=tf_crop_and_resize without a roi"
    given = [_given(_operand(node, graph.opset, w), graph) for w in ("scales", "sizes")]
    if node.op == "Upsample" and node.has_attr("scales"):
        given.append(True)
    if sum(given) != 1:
        return f"{node.op} needs exactly one of scales and sizes"
    return None


ENTRIES = (
    OpEntry("Resize", "kernel", _check_resize, lower=_lower_resize),
    OpEntry("Upsample", "kernel", _check_resize, lower=_lower_resize),
)
