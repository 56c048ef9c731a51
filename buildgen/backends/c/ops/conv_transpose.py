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


def _lower_conv_transpose(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x_shape = ctx.shape(node.inputs[0])
    if x_shape[1] // int_attr(node, "group", 1) >= GEMM_MIN_CHANNELS:
        return _lower_gemm_form(ctx, nodes)
    return _lower_scatter_form(ctx, nodes)


def _lower_gemm_form(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, wt, b, y = node.inputs[0], node.inputs[1], input_at(node, 2), node.outputs[0]
    x_shape, y_shape, w_shape = ctx.shape(x), ctx.shape(y), ctx.shape(wt)
    g = transpose_geometry(node, x_shape, y_shape, w_shape[2:])
    group = int_attr(node, "group", 1)
    c, oc = x_shape[1], y_shape[1]
    cg, mg = c // group, oc // group
    in_size, out_size, taps = prod(g.size), prod(g.out), prod(g.kernel)
    rows = mg * taps  # the GEMM's M: one row per (output channel, tap)
    col_bytes = -(-rows * in_size * 4 // 64) * 64  # the GEMM's workspace stays aligned
    code = Code()
    code.line("float *col = (float *)ws;")
    code.line(f"void *gemm_ws = (char *)ws + {col_bytes};")
    with code.block(f"for (int64_t n = 0; n < {x_shape[0]}; ++n)"):
        with code.block(f"for (int64_t m = 0; m < {oc}; ++m)"):
            code.line(f"float *y = Y + (n * {oc} + m) * {out_size};")
            fill = "B[m]" if b else "0.0f"
            code.line(f"for (int64_t i = 0; i < {out_size}; ++i) y[i] = {fill};")
        with code.block(f"for (int64_t gi = 0; gi < {group}; ++gi)"):
            code.line(
                f"bg_sgemm(1, 0, {rows}, {in_size}, {cg}, 1.0f, W + gi * {cg * rows}, {rows}, "
                f"X + (n * {c} + gi * {cg}) * {in_size}, {in_size}, 0.0f, col, {in_size}, "
                "NULL, gemm_ws, pool);")
            code.line(f"float *yg = Y + (n * {oc} + gi * {mg}) * {out_size};")
            _col2im(code, g, mg, in_size, out_size)
    params = [Param("X", x, "float"), Param("W", wt, "float")]
    if b:
        params.append(Param("B", b, "float"))
    params += [Param("Y", y, "float", is_output=True), Param("ws", "", "void"), POOL]
    return Kernel(
        kernel_stem(nodes), tuple(nodes), tuple(params), code.lines,
        workspace=col_bytes + sgemm_workspace_bytes(rows, in_size, cg),
        workspace_check=f"{col_bytes} + bg_sgemm_workspace_bytes({rows}, {in_size}, {cg})",
    )


def _col2im(code: Code, g: Spatial, mg: int, in_size: int, out_size: int) -> None:
    """Add col[(m, taps...), inputs...] into yg[m, outputs...]. For each tap, the inputs whose
    output lands inside are a range per dim, computed before the loops over them."""
    rank = len(g.size)
    with code.loops((mg, *g.kernel), prefix="j") as (m, *ks):
        tap = linear([m, *ks], contiguous_strides((mg, *g.kernel)))
        code.line(f"const float *c = col + ({tap}) * {in_size};")
        code.line(f"float *o = yg + {m} * {out_size};")
        for d in range(rank):
            # input i lands at i * stride + shift, inside for 0 <= it < out
            shift = f"{ks[d]} * {g.dilations[d]} - {g.pads_begin[d]}"
            code.line(f"const int64_t shift{d} = {shift};")
            code.line(f"const int64_t lo{d} = shift{d} >= 0 ? 0 : "
                      f"(-shift{d} + {g.strides[d] - 1}) / {g.strides[d]};")
            code.line(f"const int64_t end{d} = {g.out[d]} - 1 - shift{d};")
            code.line(f"int64_t hi{d} = end{d} < 0 ? 0 : end{d} / {g.strides[d]} + 1;")
            code.line(f"if (hi{d} > {g.size[d]}) hi{d} = {g.size[d]};")
        ins = [f"i{d}" for d in range(rank)]
        with ExitStack() as loops:
            for d, i in enumerate(ins):
                loops.enter_context(code.block(f"for (int64_t {i} = lo{d}; {i} < hi{d}; ++{i})"))
            at_in = linear(ins, contiguous_strides(g.size))
            outs = [f"({i} * {g.strides[d]} + shift{d})" for d, i in enumerate(ins)]
            at_out = " + ".join(f"{o} * {s}" if s != 1 else o
                                for o, s in zip(outs, contiguous_strides(g.out), strict=True))
            code.line(f"o[{at_out}] += c[{at_in}];")


def _lower_scatter_form(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, wt, b, y = node.inputs[0], node.inputs[1], input_at(node, 2), node.outputs[0]
    x_shape, y_shape, w_shape = ctx.shape(x), ctx.shape(y), ctx.shape(wt)
    g = transpose_geometry(node, x_shape, y_shape, w_shape[2:])
    group = int_attr(node, "group", 1)
    c, oc = x_shape[1], y_shape[1]
    cg, mg = c // group, oc // group
    in_size, out_size, taps = prod(g.size), prod(g.out), prod(g.kernel)
    code = Code()
    with code.block(f"for (int64_t n = 0; n < {x_shape[0]}; ++n)"):
        with code.block(f"for (int64_t m = 0; m < {oc}; ++m)"):
            code.line(f"float *y = Y + (n * {oc} + m) * {out_size};")
            fill = "B[m]" if b else "0.0f"
            code.line(f"for (int64_t i = 0; i < {out_size}; ++i) y[i] = {fill};")
        with code.loops((group, cg, *g.size), prefix="i") as (gi, ci, *ins):
            code.line(f"const int64_t ch = {linear([gi, ci], [cg, 1])};")
            at = linear(ins, contiguous_strides(g.size))
            code.line(f"const float v = X[(n * {c} + ch) * {in_size} + {at}];")
            code.line(f"const float *w = W + ch * {mg * taps};")
            code.line(f"float *y = Y + (n * {oc} + {gi} * {mg}) * {out_size};")
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
    params = [Param("X", x, "float"), Param("W", wt, "float")]
    if b:
        params.append(Param("B", b, "float"))
    params.append(Param("Y", y, "float", is_output=True))
    return Kernel(kernel_stem(nodes), tuple(nodes), tuple(params), code.lines)


def _check_conv_transpose(node: Node, graph: Graph) -> str | None:
    return spatial_reason(node, graph, 1, 3)


ENTRIES = (OpEntry("ConvTranspose", "kernel", _check_conv_transpose, lower=_lower_conv_transpose),)
