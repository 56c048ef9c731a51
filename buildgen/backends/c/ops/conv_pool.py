"""Conv (bg_conv2d), MaxPool/AveragePool (bg_*pool2d, bg_*pool3d) and the global pools.
1-D variants run as 2-D with a height of one. 3-D Conv is in conv3d.py, ConvTranspose in
conv_transpose.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from buildgen.backends.c.cwriter import Code, float_literal
from buildgen.backends.c.epilogue import Epilogue, build_epilogue
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import POOL, Kernel, LowerContext, Packed, Param
from buildgen.backends.c.ops.common import (
    float_attr,
    float_reason,
    input_at,
    int_attr,
    ints_attr,
    str_attr,
)
from buildgen.backends.c.registry import OpEntry
from buildgen.backends.c.workspace import (
    conv2d_packed_bytes,
    conv2d_workspace_bytes,
    pool3d_workspace_bytes,
)
from buildgen.ir import Graph, Node


@dataclass(frozen=True)
class Spatial:
    """Per spatial axis (in order: D, H, W for 3-D) geometry of a window op."""

    size: tuple[int, ...]  # input extent
    out: tuple[int, ...]  # output extent
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]


def spatial(
    node: Node,
    x_shape: Sequence[int],
    y_shape: Sequence[int],
    kernel: Sequence[int],
    explicit_pads: Sequence[int] | None = None,
) -> Spatial:
    """The window geometry of `node` (strides, dilations, pads resolved from auto_pad)."""
    rank = len(x_shape) - 2
    strides = ints_attr(node, "strides", (1,) * rank)
    dilations = ints_attr(node, "dilations", (1,) * rank)
    pads = list(ints_attr(node, "pads", (0,) * (2 * rank)))
    auto_pad = str_attr(node, "auto_pad", "NOTSET")
    if explicit_pads is not None:
        pads = list(explicit_pads)
    elif auto_pad == "VALID":
        pads = [0] * (2 * rank)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        for d in range(rank):
            span = (kernel[d] - 1) * dilations[d] + 1
            total = max(0, (y_shape[2 + d] - 1) * strides[d] + span - x_shape[2 + d])
            small, big = total // 2, total - total // 2
            pads[d], pads[rank + d] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    return Spatial(
        tuple(x_shape[2:]),
        tuple(y_shape[2:]),
        tuple(kernel),
        tuple(strides),
        tuple(dilations),
        tuple(pads[:rank]),
        tuple(pads[rank:]),
    )


@dataclass(frozen=True)
class Window:
    """The 2-D geometry of a convolution or pooling window (1-D as height 1)."""

    n: int
    c: int
    h: int
    w: int
    oc: int
    oh: int
    ow: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pad_top: int
    pad_left: int
    pad_bottom: int
    pad_right: int


def _two(values: Sequence[int], fill: int) -> tuple[int, int]:
    return (fill, values[0]) if len(values) == 1 else (values[0], values[1])


def window(
    node: Node, x_shape: Sequence[int], y_shape: Sequence[int], kernel: Sequence[int]
) -> Window:
    g = spatial(node, x_shape, y_shape, kernel)
    (h, w), (oh, ow) = _two(g.size, 1), _two(g.out, 1)
    kh, kw = _two(g.kernel, 1)
    sh, sw = _two(g.strides, 1)
    dh, dw = _two(g.dilations, 1)
    pt, pl = _two(g.pads_begin, 0)
    pb, pr = _two(g.pads_end, 0)
    return Window(
        x_shape[0], x_shape[1], h, w, y_shape[1], oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr
    )


def _conv_fields(g: Window, group: int) -> tuple[tuple[str, int], ...]:
    return (
        ("N", g.n),
        ("C", g.c),
        ("H", g.h),
        ("W", g.w),
        ("M", g.oc),
        ("OH", g.oh),
        ("OW", g.ow),
        ("KH", g.kh),
        ("KW", g.kw),
        ("group", group),
        ("stride_h", g.sh),
        ("stride_w", g.sw),
        ("dil_h", g.dh),
        ("dil_w", g.dw),
        ("pad_top", g.pad_top),
        ("pad_left", g.pad_left),
    )


def _lower_conv(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, wt, b = node.inputs[0], node.inputs[1], input_at(node, 2)
    y = nodes[-1].outputs[0]
    ep = build_epilogue(ctx, node, nodes[1:])
    if b and not ep.batchnorm:
        ep = Epilogue(b, 0, ep.activation)
    channels = ctx.shape(node.outputs[0])[1]
    if len(ctx.shape(wt)) == 5:
        from buildgen.backends.c.ops.conv3d import lower_conv3d  # it imports spatial() here

        folded = _folded_batchnorm(ep.batchnorm, channels, b) if ep.batchnorm else None
        return lower_conv3d(ctx, nodes, ep, folded)
    geometry = window(node, ctx.shape(x), ctx.shape(node.outputs[0]), ctx.shape(wt)[2:])
    group = int_attr(node, "group", 1)
    fields = _conv_fields(geometry, group)
    # Constant filters of the GEMM form are packed once, at create (depthwise reads them as
    # they are: 0 packed bytes).
    packed_bytes = conv2d_packed_bytes(dict(fields)) if ctx.graph.is_weight(wt) else 0
    filters = Param("Wp", "", "void", packed=True) if packed_bytes else Param("W", wt, "float")
    params = [Param("X", x, "float"), filters]
    if ep.bias:
        params.append(Param("bias", ep.bias, "float"))
    if ep.batchnorm:
        params.append(Param("BNp", "", "void", packed=True))
    params += [Param("Y", y, "float", is_output=True), Param("ws", "", "void"), POOL]
    code = Code()
    if ep.batchnorm:
        code.line("const float *const bn = (const float *)BNp; /* scale[M], then shift[M] */")
    ep_arg = ep.declare(code, scale_param="bn", bias_param=f"bn + {geometry.oc}"
                        if ep.batchnorm else "bias")
    if packed_bytes:
        code.line(f"bg_conv2d_prepacked(p, X, Wp, {ep_arg}, Y, ws, pool);")
    else:
        code.line(f"bg_conv2d(p, X, W, {ep_arg}, Y, ws, pool);")
    packed = [Packed("Wp", wt, packed_bytes, pack="bg_conv2d_pack_weights({params}, {src}, {dst});",
                     check="bg_conv2d_packed_bytes({params})")] if packed_bytes else []
    if ep.batchnorm:
        packed.append(_folded_batchnorm(ep.batchnorm, geometry.oc, b))
    return Kernel(
        kernel_stem(nodes),
        tuple(nodes),
        tuple(params),
        code.lines,
        workspace=conv2d_workspace_bytes(dict(fields)),
        struct=("bg_conv2d_params", fields),
        workspace_check="bg_conv2d_workspace_bytes({params})",
        packed=tuple(packed),
    )


def _folded_batchnorm(node: Node, channels: int, conv_bias: str) -> Packed:
    """The BatchNormalization after a Conv as its epilogue's scale and shift, computed at
    create from the statistics (and the Conv's bias, which the shift takes in)."""
    scale, beta, mean, var = node.inputs[1:5]
    eps = float_literal(float_attr(node, "epsilon", 1e-5))
    return Packed(
        "BNp", scale, 8 * channels,
        pack=f"bg_batchnorm_fold({channels}, {{src}}, {{src1}}, {{src2}}, {{src3}}, {eps}, "
        f"{'{src4}' if conv_bias else 'NULL'}, {{dst}});",
        check=f"bg_batchnorm_fold_bytes({channels})",
        sources=(beta, mean, var, *((conv_bias,) if conv_bias else ())),
    )


def _lower_pool(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    kernel = ints_attr(node, "kernel_shape")
    include_pad = int_attr(node, "count_include_pad", 0)
    op = "max" if node.op == "MaxPool" else "avg"
    if len(kernel) == 3:
        return _lower_pool3d(ctx, nodes, f"bg_{op}pool3d", include_pad)
    g = window(node, ctx.shape(x), ctx.shape(y), kernel)
    fields = (
        ("N", g.n),
        ("C", g.c),
        ("H", g.h),
        ("W", g.w),
        ("OH", g.oh),
        ("OW", g.ow),
        ("KH", g.kh),
        ("KW", g.kw),
        ("stride_h", g.sh),
        ("stride_w", g.sw),
        ("dil_h", g.dh),
        ("dil_w", g.dw),
        ("pad_top", g.pad_top),
        ("pad_left", g.pad_left),
        ("count_include_pad", include_pad),
        ("pad_bottom", g.pad_bottom),
        ("pad_right", g.pad_right),
    )
    params = (Param("X", x, "float"), Param("Y", y, "float", is_output=True), POOL)
    body = (f"    bg_{op}pool2d(p, X, Y, pool);",)
    return Kernel(
        kernel_stem(nodes), tuple(nodes), params, body, struct=("bg_pool2d_params", fields)
    )


def _lower_pool3d(ctx: LowerContext, nodes: Sequence[Node], fn: str, include_pad: int) -> Kernel:
    """bg_{max,avg}pool3d: two passes of the 2-D kernels through a workspace (bg_pool.h)."""
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    x_shape, y_shape = ctx.shape(x), ctx.shape(y)
    g = spatial(node, x_shape, y_shape, ints_attr(node, "kernel_shape"))
    axes = ("d", "h", "w")
    fields = (
        ("N", x_shape[0]),
        ("C", x_shape[1]),
        *zip(("D", "H", "W"), g.size, strict=True),
        *zip(("OD", "OH", "OW"), g.out, strict=True),
        *zip(("KD", "KH", "KW"), g.kernel, strict=True),
        *((f"stride_{a}", v) for a, v in zip(axes, g.strides, strict=True)),
        *((f"dil_{a}", v) for a, v in zip(axes, g.dilations, strict=True)),
        *zip(("pad_front", "pad_top", "pad_left"), g.pads_begin, strict=True),
        *zip(("pad_back", "pad_bottom", "pad_right"), g.pads_end, strict=True),
        ("count_include_pad", include_pad),
    )
    workspace = pool3d_workspace_bytes(dict(fields))
    params = (
        Param("X", x, "float"),
        Param("Y", y, "float", is_output=True),
        Param("ws", "", "void"),
    )
    return Kernel(
        kernel_stem(nodes),
        tuple(nodes),
        params,
        (f"    {fn}(p, X, Y, ws);",),
        workspace=workspace,
        struct=("bg_pool3d_params", fields),
        workspace_check="bg_pool3d_workspace_bytes({params})",
    )


def _lower_global_pool(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    shape = ctx.shape(x)
    planes, size = shape[0] * shape[1], ctx.graph.type_of(x).numel // (shape[0] * shape[1])
    is_max = node.op == "GlobalMaxPool"
    code = Code()
    with code.block(f"for (int64_t i = 0; i < {planes}; ++i)"):
        code.line(f"const float *x = X + i * {size};")
        code.line("float acc = x[0];")
        with code.block(f"for (int64_t j = 1; j < {size}; ++j)"):
            code.line("acc = x[j] > acc ? x[j] : acc;" if is_max else "acc += x[j];")
        code.line("Y[i] = acc;" if is_max else f"Y[i] = acc / {size}.0f;")
    params = (Param("X", x, "float"), Param("Y", y, "float", is_output=True))
    return Kernel(kernel_stem(nodes), tuple(nodes), params, code.lines)


def spatial_reason(node: Node, graph: Graph, lo: int = 1, hi: int = 2) -> str | None:
    rank = graph.type_of(node.inputs[0]).rank
    if not lo + 2 <= rank <= hi + 2:
        return f"{node.op} with {rank - 2}-D kernel not supported"
    return float_reason(node, graph)


def _check_conv(node: Node, graph: Graph) -> str | None:
    return spatial_reason(node, graph, 1, 3)


def _check_pool(node: Node, graph: Graph) -> str | None:
    if node.op == "MaxPool" and len([o for o in node.outputs if o]) > 1:
        return "MaxPool with an Indices output not supported"
    return spatial_reason(node, graph, 1, 3) or _ceil_reason(node, graph)


def _ceil_reason(node: Node, graph: Graph) -> str | None:
    """With ceil_mode the spec (and onnxruntime) drop a last window that would start in
    the end padding, but ONNX shape inference (onnx 1.23) keeps it: the graph's output
    shape is then one too large, and no kernel can produce what the spec says."""
    if not int_attr(node, "ceil_mode", 0):
        return None
    x, y = graph.type_of(node.inputs[0]).shape, graph.type_of(node.outputs[0]).shape
    g = spatial(node, x, y, ints_attr(node, "kernel_shape"))
    for d in range(len(g.size)):
        if (g.out[d] - 1) * g.strides[d] >= g.size[d] + g.pads_begin[d]:
            return (
                f"{node.op} with ceil_mode whose last window starts in the end padding not "
                "supported (ONNX shape inference keeps that window; the spec drops it)"
            )
    return None


def _check_global(node: Node, graph: Graph) -> str | None:
    return spatial_reason(node, graph, 0, 8)


ENTRIES = (
    OpEntry("Conv", "kernel", _check_conv, lower=_lower_conv),
    OpEntry("MaxPool", "kernel", _check_pool, lower=_lower_pool),
    OpEntry("AveragePool", "kernel", _check_pool, lower=_lower_pool),
    OpEntry("GlobalAveragePool", "kernel", _check_global, lower=_lower_global_pool),
    OpEntry("GlobalMaxPool", "kernel", _check_global, lower=_lower_global_pool),
)
