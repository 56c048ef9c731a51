"""ConvTranspose of any spatial rank (1-D, 2-D, 3-D): a GEMM and a col2im, or direct loops.

The weight is (C, M/group, k...) and the output channel block of group g is
[g*M/group, (g+1)*M/group).

GEMM form (as onnxruntime and the BLAS-based frameworks do it), for each image and group:
    col[M/group * taps, in_size] = W_g^T [M/group * taps, C/group] @ X_g [C/group, in_size]
then col2im adds each column of taps into the output at (input position * stride - pad +
tap * dilation). The products run in bg_sgemm's micro-kernel (and on the instance's threads);
the direct loops ran them one scalar multiply-add at a time: PP-OCRv4's detector spent 48 of
its 70 ms in two ConvTransposes (24 channels, 2 x 2 kernel, stride 2) at 0.7 GFLOP/s.

Scatter form, for one input channel per group (a depthwise ConvTranspose, where the GEMM
would have K = 1): every input element adds its weighted kernel into the output, skipping
the taps that land outside it (the pads cut them off).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from math import prod

from buildgen.backends.c.cwriter import Code, contiguous_strides, linear
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import POOL, Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import input_at, int_attr, ints_attr, str_attr
from buildgen.backends.c.ops.conv_pool import Spatial, spatial, spatial_reason
from buildgen.backends.c.registry import OpEntry
from buildgen.backends.c.workspace import sgemm_workspace_bytes
from buildgen.ir import Graph, Node


def transpose_geometry(
    node: Node, x_shape: Sequence[int], y_shape: Sequence[int], kernel: Sequence[int]
) -> Spatial:
    """The geometry with the pads that make the output `y_shape` (output_shape, auto_pad)."""
    rank = len(x_shape) - 2
    strides = ints_attr(node, "strides", (1,) * rank)
    dilations = ints_attr(node, "dilations", (1,) * rank)
    out_pad = ints_attr(node, "output_padding", (0,) * rank)
    auto_pad = str_attr(node, "auto_pad", "NOTSET")
    pads = list(ints_attr(node, "pads", (0,) * (2 * rank)))
    if auto_pad != "NOTSET" or node.has_attr("output_shape"):
        for d in range(rank):
            span = (kernel[d] - 1) * dilations[d] + 1
            total = max(0, strides[d] * (x_shape[2 + d] - 1) + out_pad[d] + span - y_shape[2 + d])
            # onnxruntime puts the larger half at the start unless SAME_UPPER asks otherwise
            small, big = total // 2, total - total // 2
            pads[d], pads[rank + d] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    return spatial(node, x_shape, y_shape, kernel, pads)


# Input channels per group from which the GEMM form is used: below, the products are too
# short for the micro-kernel to pay for packing.
GEMM_MIN_CHANNELS = 4


@dataclass(frozen=True)
class _Transpose:
    """One ConvTranspose's tensors and sizes, as both forms read them."""

    x: str
    w: str
    b: str  # "" without a bias
    y: str
    g: Spatial
    batch: int
    group: int
    c: int  # input channels
    oc: int  # output channels

    @property
    def cg(self) -> int:
        return self.c // self.group

    @property
    def mg(self) -> int:
        return self.oc // self.group

    @property
    def in_size(self) -> int:
        return prod(self.g.size)

    @property
    def out_size(self) -> int:
        return prod(self.g.out)

    @property
    def taps(self) -> int:
        return prod(self.g.kernel)

    def params(self) -> list[Param]:
        params = [Param("X", self.x, "float"), Param("W", self.w, "float")]
        if self.b:
            params.append(Param("B", self.b, "float"))
        return [*params, Param("Y", self.y, "float", is_output=True)]

    def fill_outputs(self, code: Code) -> None:
        """Image n's outputs start as the bias (or 0): both forms add into them."""
        with code.block(f"for (int64_t m = 0; m < {self.oc}; ++m)"):
            code.line(f"float *y = Y + (n * {self.oc} + m) * {self.out_size};")
            fill = "B[m]" if self.b else "0.0f"
            code.line(f"for (int64_t i = 0; i < {self.out_size}; ++i) y[i] = {fill};")


def _lower_conv_transpose(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, w, y = node.inputs[0], node.inputs[1], node.outputs[0]
    x_shape, y_shape = ctx.shape(x), ctx.shape(y)
    t = _Transpose(x, w, input_at(node, 2), y,
                   transpose_geometry(node, x_shape, y_shape, ctx.shape(w)[2:]),
                   x_shape[0], int_attr(node, "group", 1), x_shape[1], y_shape[1])
    if t.cg >= GEMM_MIN_CHANNELS:
        return _gemm_form(t, nodes)
    return _scatter_form(t, nodes)


def _gemm_form(t: _Transpose, nodes: Sequence[Node]) -> Kernel:
    rows = t.mg * t.taps  # the GEMM's M: one row per (output channel, tap)
    col_bytes = -(-rows * t.in_size * 4 // 64) * 64  # the GEMM's workspace stays aligned
    code = Code()
    code.line("float *col = (float *)ws;")
    code.line(f"void *gemm_ws = (char *)ws + {col_bytes};")
    with code.block(f"for (int64_t n = 0; n < {t.batch}; ++n)"):
        t.fill_outputs(code)
        with code.block(f"for (int64_t gi = 0; gi < {t.group}; ++gi)"):
            code.line(
                f"bg_sgemm(1, 0, {rows}, {t.in_size}, {t.cg}, 1.0f, W + gi * {t.cg * rows}, "
                f"{rows}, X + (n * {t.c} + gi * {t.cg}) * {t.in_size}, {t.in_size}, 0.0f, "
                f"col, {t.in_size}, NULL, gemm_ws, pool);")
            code.line(f"float *yg = Y + (n * {t.oc} + gi * {t.mg}) * {t.out_size};")
            _col2im(code, t)
    params = [*t.params(), Param("ws", "", "void"), POOL]
    return Kernel(
        kernel_stem(nodes), tuple(nodes), tuple(params), code.lines,
        workspace=col_bytes + sgemm_workspace_bytes(rows, t.in_size, t.cg),
        workspace_check=f"{col_bytes} + bg_sgemm_workspace_bytes({rows}, {t.in_size}, {t.cg})",
    )


def _col2im(code: Code, t: _Transpose) -> None:
    """Add col[(m, taps...), inputs...] into yg[m, outputs...]. For each tap, the inputs whose
    output lands inside are a range per dim, computed before the loops over them."""
    g = t.g
    with code.loops((t.mg, *g.kernel), prefix="j") as (m, *ks):
        tap = linear([m, *ks], contiguous_strides((t.mg, *g.kernel)))
        code.line(f"const float *c = col + ({tap}) * {t.in_size};")
        code.line(f"float *o = yg + {m} * {t.out_size};")
        for d in range(len(g.size)):
            # input i lands at i * stride + shift, inside for 0 <= it < out
            code.line(f"const int64_t shift{d} = {ks[d]} * {g.dilations[d]} - {g.pads_begin[d]};")
            code.line(f"const int64_t lo{d} = shift{d} >= 0 ? 0 : "
                      f"(-shift{d} + {g.strides[d] - 1}) / {g.strides[d]};")
            code.line(f"const int64_t end{d} = {g.out[d]} - 1 - shift{d};")
            code.line(f"int64_t hi{d} = end{d} < 0 ? 0 : end{d} / {g.strides[d]} + 1;")
            code.line(f"if (hi{d} > {g.size[d]}) hi{d} = {g.size[d]};")
        ins = [f"i{d}" for d in range(len(g.size))]
        with ExitStack() as loops:
            for d, i in enumerate(ins):
                loops.enter_context(code.block(f"for (int64_t {i} = lo{d}; {i} < hi{d}; ++{i})"))
            at_in = linear(ins, contiguous_strides(g.size))
            outs = [f"({i} * {g.strides[d]} + shift{d})" for d, i in enumerate(ins)]
            at_out = " + ".join(f"{o} * {s}" if s != 1 else o
                                for o, s in zip(outs, contiguous_strides(g.out), strict=True))
            code.line(f"o[{at_out}] += c[{at_in}];")


def _scatter_form(t: _Transpose, nodes: Sequence[Node]) -> Kernel:
    g, cg, mg = t.g, t.cg, t.mg
    code = Code()
    with code.block(f"for (int64_t n = 0; n < {t.batch}; ++n)"):
        t.fill_outputs(code)
        with code.loops((t.group, cg, *g.size), prefix="i") as (gi, ci, *ins):
            code.line(f"const int64_t ch = {linear([gi, ci], [cg, 1])};")
            at = linear(ins, contiguous_strides(g.size))
            code.line(f"const float v = X[(n * {t.c} + ch) * {t.in_size} + {at}];")
            code.line(f"const float *w = W + ch * {mg * t.taps};")
            code.line(f"float *y = Y + (n * {t.oc} + {gi} * {mg}) * {t.out_size};")
            with code.loops((mg, *g.kernel), prefix="j") as (m, *ks):
                outs = [f"o{d}" for d in range(len(ks))]
                for d, (o, i, k) in enumerate(zip(outs, ins, ks, strict=True)):
                    at = linear([i, k], [g.strides[d], g.dilations[d]], -g.pads_begin[d])
                    code.line(f"const int64_t {o} = {at};")
                outside = " || ".join(
                    f"{o} < 0 || {o} >= {size}" for o, size in zip(outs, g.out, strict=True)
                )
                code.line(f"if ({outside}) continue;")
                tap = linear([m, *ks], contiguous_strides((mg, *g.kernel)))
                target = linear([m, *outs], contiguous_strides((mg, *g.out)))
                code.line(f"y[{target}] += v * w[{tap}];")
    return Kernel(kernel_stem(nodes), tuple(nodes), tuple(t.params()), code.lines)


def _check_conv_transpose(node: Node, graph: Graph) -> str | None:
    return spatial_reason(node, graph, 1, 3)


ENTRIES = (OpEntry("ConvTranspose", "kernel", _check_conv_transpose, lower=_lower_conv_transpose),)
