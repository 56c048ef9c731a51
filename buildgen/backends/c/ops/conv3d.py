"""Conv with a 3-D kernel (video and volumetric models: R3D, I3D, 3-D U-Net) as direct loops.

Gather form: each output element sums its window over the input channels of its group and
the kernel taps, skipping taps that fall in the padding, then takes the epilogue the
fusion pass gave the Conv (bias, or a folded BatchNormalization, and an activation) in the
same store. The 1-D and 2-D Convs run on bg_conv2d's packed GEMM kernels instead; 3-D
shapes are rare enough in the models users bring that plain loops the compiler vectorises
over the innermost tap were chosen over a third packed kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from buildgen.backends.c.cwriter import Code, contiguous_strides, linear
from buildgen.backends.c.epilogue import Epilogue
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Packed, Param
from buildgen.backends.c.ops.common import int_attr
from buildgen.backends.c.ops.conv_pool import spatial
from buildgen.ir import Node


def lower_conv3d(
    ctx: LowerContext, nodes: Sequence[Node], ep: Epilogue, folded_bn: Packed | None
) -> Kernel:
    node = nodes[0]
    x, wt, y = node.inputs[0], node.inputs[1], nodes[-1].outputs[0]
    x_shape, y_shape = ctx.shape(x), ctx.shape(node.outputs[0])
    g = spatial(node, x_shape, y_shape, ctx.shape(wt)[2:])
    group = int_attr(node, "group", 1)
    c, m = x_shape[1], y_shape[1]
    cg, mg = c // group, m // group
    in_size, out_size, taps = prod(g.size), prod(g.out), prod(g.kernel)
    code = Code()
    # Only the activation goes through bg_epilogue; the scale and bias are applied inline.
    act_arg = Epilogue(activation=ep.activation).declare(code)
    with code.loops((x_shape[0], m, *g.out), prefix="o") as (n, oc, *outs):
        code.line(f"const int64_t gi = {oc} / {mg};")
        code.line("float acc = 0.0f;")
        with code.loops((cg, *g.kernel), prefix="k") as (ci, *ks):
            ins = [f"i{d}" for d in range(len(ks))]
            for d, (i, o, k) in enumerate(zip(ins, outs, ks, strict=True)):
                code.line(f"const int64_t {i} = "
                          f"{linear([o, k], [g.strides[d], g.dilations[d]], -g.pads_begin[d])};")
            outside = " || ".join(f"{i} < 0 || {i} >= {size}" for i, size in zip(
                ins, g.size, strict=True))
            code.line(f"if ({outside}) continue;")
            at = linear(ins, contiguous_strides(g.size))
            code.line(f"const float v = X[({n} * {c} + gi * {cg} + {ci}) * {in_size} + {at}];")
            tap = linear(ks, contiguous_strides(g.kernel))
            code.line(f"acc += v * W[({oc} * {cg} + {ci}) * {taps} + {tap}];")
        for line in _store(ep, act_arg, oc, m):
            code.line(line)
        target = linear(outs, contiguous_strides(g.out))
        code.line(f"Y[({n} * {m} + {oc}) * {out_size} + {target}] = acc;")
    params = [Param("X", x, "float"), Param("W", wt, "float")]
    if ep.bias:
        params.append(Param("bias", ep.bias, "float"))
    if folded_bn is not None:
        params.append(Param("BNp", "", "void", packed=True))
    params.append(Param("Y", y, "float", is_output=True))
    return Kernel(kernel_stem(nodes), tuple(nodes), tuple(params), code.lines,
                  packed=(folded_bn,) if folded_bn is not None else ())


def _store(ep: Epilogue, act_arg: str, oc: str, channels: int) -> list[str]:
    """The epilogue on `acc`, in bg_epilogue's order: scale, bias, activation."""
    lines = []
    if ep.batchnorm:
        lines.append(f"acc = acc * ((const float *)BNp)[{oc}] "
                     f"+ ((const float *)BNp)[{channels} + {oc}];")
    elif ep.bias:
        lines.append(f"acc += bias[{oc}];")
    if ep.activation.act != "BG_ACT_NONE":
        lines.append(f"acc = bg_act_scalar(acc, {act_arg});")
    return lines
