"""Conv (bg_conv2d), ConvTranspose (direct loops), MaxPool/AveragePool (bg_*pool2d) and the
global pools. 1-D variants run as 2-D with a height of one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from buildgen.backends.c.cwriter import Code
from buildgen.backends.c.epilogue import Epilogue, build_epilogue
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import float_reason, input_at, int_attr, ints_attr, str_attr
from buildgen.backends.c.registry import OpEntry
from buildgen.backends.c.workspace import conv2d_workspace_bytes
from buildgen.ir import Graph, Node


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
    node: Node,
    x_shape: Sequence[int],
    y_shape: Sequence[int],
    kernel: Sequence[int],
    explicit_pads: Sequence[int] | None = None,
) -> Window:
    spatial = len(x_shape) - 2
    strides = ints_attr(node, "strides", (1,) * spatial)
    dilations = ints_attr(node, "dilations", (1,) * spatial)
    pads = list(ints_attr(node, "pads", (0,) * (2 * spatial)))
    auto_pad = str_attr(node, "auto_pad", "NOTSET")
    if explicit_pads is not None:
        pads = list(explicit_pads)
    elif auto_pad == "VALID":
        pads = [0] * (2 * spatial)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        for d in range(spatial):
            span = (kernel[d] - 1) * dilations[d] + 1
            total = max(0, (y_shape[2 + d] - 1) * strides[d] + span - x_shape[2 + d])
            small, big = total // 2, total - total // 2
            pads[d], pads[spatial + d] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    (h, w), (oh, ow) = _two(x_shape[2:], 1), _two(y_shape[2:], 1)
    kh, kw = _two(kernel, 1)
    sh, sw = _two(strides, 1)
    dh, dw = _two(dilations, 1)
    pt, pl = _two(pads[:spatial], 0)
    pb, pr = _two(pads[spatial:], 0)
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
    geometry = window(node, ctx.shape(x), ctx.shape(node.outputs[0]), ctx.shape(wt)[2:])
    group = int_attr(node, "group", 1)
    ep = build_epilogue(ctx, node, nodes[1:])
    if b:
        ep = Epilogue(b, 0, ep.activation)
    params = [Param("X", x, "float"), Param("W", wt, "float")]
    if ep.bias:
        params.append(Param("bias", ep.bias, "float"))
    params += [Param("Y", y, "float", is_output=True), Param("ws", "", "void")]
    code = Code()
    ep_arg = ep.declare(code)
    code.line(f"bg_conv2d(p, X, W, {ep_arg}, Y, ws);")
    fields = _conv_fields(geometry, group)
    return Kernel(
        kernel_stem(nodes),
        tuple(nodes),
        tuple(params),
        code.lines,
        workspace=conv2d_workspace_bytes(dict(fields)),
        struct=("bg_conv2d_params", fields),
        workspace_check="bg_conv2d_workspace_bytes({params})",
    )


def _lower_pool(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    g = window(node, ctx.shape(x), ctx.shape(y), ints_attr(node, "kernel_shape"))
    include_pad = int_attr(node, "count_include_pad", 0)
    fn = "bg_maxpool2d" if node.op == "MaxPool" else "bg_avgpool2d"
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
    params = (Param("X", x, "float"), Param("Y", y, "float", is_output=True))
    body = (f"    {fn}(p, X, Y);",)
    return Kernel(
        kernel_stem(nodes), tuple(nodes), params, body, struct=("bg_pool2d_params", fields)
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


def _lower_conv_transpose(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """Scatter form: every input pixel adds its weighted kernel into the output."""
    node = nodes[0]
    x, wt, b, y = node.inputs[0], node.inputs[1], input_at(node, 2), node.outputs[0]
    x_shape, y_shape, w_shape = ctx.shape(x), ctx.shape(y), ctx.shape(wt)
    group = int_attr(node, "group", 1)
    g = _transpose_window(node, x_shape, y_shape, w_shape[2:])
    cg, mg = g.c // group, g.oc // group
    code = Code()
    with code.block(f"for (int64_t n = 0; n < {g.n}; ++n)"):
        with code.block(f"for (int64_t m = 0; m < {g.oc}; ++m)"):
            code.line(f"float *y = Y + (n * {g.oc} + m) * {g.oh * g.ow};")
            code.line(
                f"for (int64_t i = 0; i < {g.oh * g.ow}; ++i) y[i] = {'B[m]' if b else '0.0f'};"
            )
        with code.loops((group, cg, g.h, g.w), prefix="i") as (gi, c, ih, iw):
            channel = f"n * {g.c} + {gi} * {cg} + {c}"
            code.line(f"const float v = X[(({channel}) * {g.h} + {ih}) * {g.w} + {iw}];")
            code.line(f"const float *w = W + ({gi} * {cg} + {c}) * {mg * g.kh * g.kw};")
            code.line(f"float *y = Y + (n * {g.oc} + {gi} * {mg}) * {g.oh * g.ow};")
            with code.loops((mg, g.kh, g.kw), prefix="j") as (m, kh, kw):
                code.line(f"const int64_t oh = {ih} * {g.sh} + {kh} * {g.dh} - {g.pad_top};")
                code.line(f"const int64_t ow = {iw} * {g.sw} + {kw} * {g.dw} - {g.pad_left};")
                code.line(f"if (oh < 0 || oh >= {g.oh} || ow < 0 || ow >= {g.ow}) continue;")
                tap = f"w[({m} * {g.kh} + {kh}) * {g.kw} + {kw}]"
                code.line(f"y[({m} * {g.oh} + oh) * {g.ow} + ow] += v * {tap};")
    params = [Param("X", x, "float"), Param("W", wt, "float")]
    if b:
        params.append(Param("B", b, "float"))
    params.append(Param("Y", y, "float", is_output=True))
    return Kernel(kernel_stem(nodes), tuple(nodes), tuple(params), code.lines)


def _transpose_window(
    node: Node, x_shape: Sequence[int], y_shape: Sequence[int], kernel: Sequence[int]
) -> Window:
    spatial = len(x_shape) - 2
    strides = ints_attr(node, "strides", (1,) * spatial)
    dilations = ints_attr(node, "dilations", (1,) * spatial)
    out_pad = ints_attr(node, "output_padding", (0,) * spatial)
    auto_pad = str_attr(node, "auto_pad", "NOTSET")
    pads = list(ints_attr(node, "pads", (0,) * (2 * spatial)))
    if auto_pad != "NOTSET" or node.has_attr("output_shape"):
        for d in range(spatial):
            span = (kernel[d] - 1) * dilations[d] + 1
            total = max(0, strides[d] * (x_shape[2 + d] - 1) + out_pad[d] + span - y_shape[2 + d])
            # onnxruntime puts the larger half at the start unless SAME_UPPER asks otherwise
            small, big = total // 2, total - total // 2
            pads[d], pads[spatial + d] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    return window(node, x_shape, y_shape, kernel, pads)


def _spatial_reason(node: Node, graph: Graph, lo: int = 1, hi: int = 2) -> str | None:
    rank = graph.type_of(node.inputs[0]).rank
    if not lo + 2 <= rank <= hi + 2:
        return f"{node.op} with {rank - 2}-D kernel not supported"
    return float_reason(node, graph)


def _check_pool(node: Node, graph: Graph) -> str | None:
    if node.op == "MaxPool" and len([o for o in node.outputs if o]) > 1:
        return "MaxPool with an Indices output not supported"
    return _spatial_reason(node, graph)


def _check_global(node: Node, graph: Graph) -> str | None:
    return _spatial_reason(node, graph, 0, 8)


ENTRIES = (
    OpEntry("Conv", "kernel", _spatial_reason, lower=_lower_conv),
    OpEntry("ConvTranspose", "kernel", _spatial_reason, lower=_lower_conv_transpose),
    OpEntry("MaxPool", "kernel", _check_pool, lower=_lower_pool),
    OpEntry("AveragePool", "kernel", _check_pool, lower=_lower_pool),
    OpEntry("GlobalAveragePool", "kernel", _check_global, lower=_lower_global_pool),
    OpEntry("GlobalMaxPool", "kernel", _check_global, lower=_lower_global_pool),
)
