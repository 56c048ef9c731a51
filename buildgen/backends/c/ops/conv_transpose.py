"""ConvTranspose of any spatial rank (1-D, 2-D, 3-D) as direct loops.

Scatter form: every input element adds its weighted kernel into the output, so the loops
run over the input and the kernel taps, and only taps that land outside the output (the
pads cut them off) are skipped. The weight is (C, M/group, k...) and the output channel
block of group g is [g*M/group, (g+1)*M/group).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from buildgen.backends.c.cwriter import Code, contiguous_strides, linear
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import input_at, int_attr, ints_attr, str_attr
from buildgen.backends.c.ops.conv_pool import Spatial, spatial, spatial_reason
from buildgen.backends.c.registry import OpEntry
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


def _lower_conv_transpose(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
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
