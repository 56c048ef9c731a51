"""Softmax, LogSoftmax and Hardmax, along one axis with either opset's semantics (before
13: the input flattened to 2-D at `axis`; from 13: `axis` alone), and `lanes`, the loops
over such an axis that LpNormalization shares."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from math import prod

from buildgen.backends.c.cwriter import Code, linear
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import float_reason, int_attr, normalize_axis
from buildgen.backends.c.registry import OpEntry
from buildgen.ir import Node


def _kernel(nodes: Sequence[Node], params: list[Param], code: Code) -> Kernel:
    return Kernel(kernel_stem(nodes), tuple(nodes), tuple(params), code.lines)


def softmax_extents(node: Node, shape: Sequence[int], opset: int) -> tuple[int, int, int]:
    """(outer, n, inner): softmax runs over n elements spaced `inner` apart.
    Before opset 13 the input is flattened to 2-D at `axis` (default 1); from 13 on it runs
    along `axis` alone (default -1)."""
    if opset < 13:
        axis = normalize_axis(int_attr(node, "axis", 1), len(shape))
        return prod(shape[:axis]), prod(shape[axis:]), 1
    axis = normalize_axis(int_attr(node, "axis", -1), len(shape))
    return prod(shape[:axis]), shape[axis], prod(shape[axis + 1 :])


def _lower_softmax(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    outer, n, inner = softmax_extents(node, ctx.shape(x), ctx.graph.opset)
    log = node.op == "LogSoftmax"
    code = Code()
    if inner > 1:
        _softmax_columns(code, outer, n, inner, log)
        return _kernel(nodes, [Param("X", x, "float"), Param("Y", y, "float", True)], code)
    at = "j"
    with code.loops((outer,), prefix="o") as idx:
        code.line(f"const float *x = X + {idx[0]} * {n};")
        code.line(f"float *y = Y + {idx[0]} * {n};")
        _lane_max(code, n, at)
        if log:
            code.line(f"for (int64_t j = 0; j < {n}; ++j) y[{at}] = bg_expf(x[{at}] - max);")
            _lane_sum(code, n, at)
            code.line("const float shift = max + (float)log(sum);")
            code.line(f"for (int64_t j = 0; j < {n}; ++j) y[{at}] = x[{at}] - shift;")
        else:
            code.line(f"for (int64_t j = 0; j < {n}; ++j) y[{at}] = bg_expf(x[{at}] - max);")
            _lane_sum(code, n, at)
            code.line("const float scale = (float)(1.0 / sum);")
            code.line(f"for (int64_t j = 0; j < {n}; ++j) y[{at}] *= scale;")
    return _kernel(nodes, [Param("X", x, "float"), Param("Y", y, "float", True)], code)


# Adjacent lanes one pass of a softmax over a non-innermost axis handles: their running
# max, sum and scale fit in L1 next to the rows being read.
_COLUMNS = 64


def _softmax_columns(code: Code, outer: int, n: int, inner: int, log: bool) -> None:
    """Softmax over n elements `inner` apart, a block of adjacent lanes at a time: each step
    along the axis reads a contiguous run of the block, so the loops (and bg_expf) vectorize.
    One lane at a time, every read was `inner` floats from the last and every exp scalar:
    YOLOv8's DFL head, [1, 16, 4, 2100] over axis 1, took 0.46 ms at x86-64-v4 and takes 0.11
    (a standalone copy of both loops, best of 50). A lane's max keeps NaN as before, and its
    sum runs in double, in order along the axis."""
    width = min(inner, _COLUMNS)

    def row(j: str) -> str:
        return f"x[{j} * {inner} + k]"

    with code.loops((outer,), prefix="o") as (o,), \
            code.block(f"for (int64_t c0 = 0; c0 < {inner}; c0 += {width})"):
        code.line(f"const int64_t w = {inner} - c0 < {width} ? {inner} - c0 : {width};")
        code.line(f"const float *x = X + {o} * {n * inner} + c0;")
        code.line(f"float *y = Y + {o} * {n * inner} + c0;")
        code.line(f"float max[{width}], scale[{width}];")
        code.line(f"double sum[{width}];")
        code.line("for (int64_t k = 0; k < w; ++k) { max[k] = x[k]; sum[k] = 0.0; }")
        code.line(f"for (int64_t j = 1; j < {n}; ++j)")
        code.line(f"    for (int64_t k = 0; k < w; ++k) max[k] = {row('j')} > max[k] ? "
                  f"{row('j')} : max[k];")
        store = "" if log else f"y[j * {inner} + k] = e; "
        code.line(f"for (int64_t j = 0; j < {n}; ++j)")
        code.line(f"    for (int64_t k = 0; k < w; ++k) {{ const float e = "
                  f"bg_expf({row('j')} - max[k]); {store}sum[k] += e; }}")
        if log:
            code.line("for (int64_t k = 0; k < w; ++k) scale[k] = max[k] + (float)log(sum[k]);")
            code.line(f"for (int64_t j = 0; j < {n}; ++j)")
            code.line(f"    for (int64_t k = 0; k < w; ++k) y[j * {inner} + k] = "
                      f"{row('j')} - scale[k];")
        else:
            code.line("for (int64_t k = 0; k < w; ++k) scale[k] = (float)(1.0 / sum[k]);")
            code.line(f"for (int64_t j = 0; j < {n}; ++j)")
            code.line(f"    for (int64_t k = 0; k < w; ++k) y[j * {inner} + k] *= scale[k];")


# Reductions run in eight independent lanes: one running value would be a chain the
# compiler may not reorder (no -ffast-math), which keeps the whole loop scalar.
_LANES = 8


def _lane_max(code: Code, n: int, at: str) -> None:
    """`max` = the largest x (a NaN first element stays NaN, as in one running max)."""
    code.line("float max = x[0];")
    if n < 2 * _LANES:
        code.line(f"for (int64_t j = 1; j < {n}; ++j) max = x[{at}] > max ? x[{at}] : max;")
        return
    whole = n // _LANES * _LANES
    code.line(f"float lane[{_LANES}];")
    code.line(f"for (int l = 0; l < {_LANES}; ++l) lane[l] = max;")
    with (code.block(f"for (int64_t i = 0; i < {whole}; i += {_LANES})"),
          code.block(f"for (int l = 0; l < {_LANES}; ++l)")):
        code.line("const int64_t j = i + l;")
        code.line(f"lane[l] = x[{at}] > lane[l] ? x[{at}] : lane[l];")
    code.line(f"for (int l = 0; l < {_LANES}; ++l) max = lane[l] > max ? lane[l] : max;")
    if whole < n:
        code.line(f"for (int64_t j = {whole}; j < {n}; ++j) "
                  f"max = x[{at}] > max ? x[{at}] : max;")


def _lane_sum(code: Code, n: int, at: str) -> None:
    """`sum` = the y in double: over a vocabulary (10^4-10^5 terms) a float sum drifts past
    1e-4 relative from onnxruntime's."""
    if n < 2 * _LANES:
        code.line("double sum = 0.0;")
        code.line(f"for (int64_t j = 0; j < {n}; ++j) sum += y[{at}];")
        return
    whole = n // _LANES * _LANES
    code.line(f"double part[{_LANES}] = {{0.0}};")
    with code.block(f"for (int64_t i = 0; i < {whole}; i += {_LANES})"):
        code.line(f"for (int l = 0; l < {_LANES}; ++l) {{ const int64_t j = i + l; "
                  f"part[l] += y[{at}]; }}")
    code.line("double sum = ((part[0] + part[1]) + (part[2] + part[3])) + "
              "((part[4] + part[5]) + (part[6] + part[7]));")
    if whole < n:
        code.line(f"for (int64_t j = {whole}; j < {n}; ++j) sum += y[{at}];")


@contextmanager
def lanes(code: Code, outer: int, n: int, inner: int) -> Iterator[str]:
    """Loops over the lanes of an (outer, n, inner) tensor, each n elements spaced `inner`
    apart; declares x and y at the lane's first element and yields the index of the j-th
    element relative to them."""
    loops = [(e, s) for e, s in ((outer, n * inner), (inner, 1)) if e > 1]
    with code.loops([e for e, _ in loops], prefix="o") as names:
        base = linear(names, [s for _, s in loops])
        code.line(f"const float *x = X + {base};" if base != "0" else "const float *x = X;")
        code.line(f"float *y = Y + {base};" if base != "0" else "float *y = Y;")
        yield "j" if inner == 1 else f"j * {inner}"


def _lower_hardmax(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """1 at the first largest element along the softmax axis (same opset rules), 0 elsewhere."""
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    outer, n, inner = softmax_extents(node, ctx.shape(x), ctx.graph.opset)
    best = "best" if inner == 1 else f"best * {inner}"
    code = Code()
    with lanes(code, outer, n, inner) as at:
        code.line("int64_t best = 0;")
        with code.block(f"for (int64_t j = 0; j < {n}; ++j)"):
            code.line(f"if (x[{at}] > x[{best}]) best = j;")
            code.line(f"y[{at}] = 0.0f;")
        code.line(f"y[{best}] = 1.0f;")
    return _kernel(nodes, [Param("X", x, "float"), Param("Y", y, "float", True)], code)


ENTRIES = (
    OpEntry("Softmax", "kernel", float_reason, lower=_lower_softmax),
    OpEntry("LogSoftmax", "kernel", float_reason, lower=_lower_softmax),
    OpEntry("Hardmax", "kernel", float_reason, lower=_lower_hardmax),
)
