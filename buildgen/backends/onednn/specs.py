"""Each group of a oneDNN region as the C block that builds its primitive at create time:
a constant spec for one of bg_onednn_ops.h's helpers, the post-ops of its fused steps, and
the call. The comment above the block lists the ONNX nodes it implements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod

import numpy as np

from buildgen.backends.c.cwriter import comment, float_literal, shape_text
from buildgen.backends.cpu_common.geometry import Window, window
from buildgen.backends.cpu_common.groups import Group
from buildgen.backends.cpu_common.steps import Act, Affine, Binary, Gelu, Shuffle, Step, Swish
from buildgen.backends.cpu_common.values import bn_scale_shift, scalar_operand, weight
from buildgen.backends.onednn.blocks import Block, Context, dims, posts_lines, spec
from buildgen.backends.onednn.layout import RegionLayout, sum_step
from buildgen.backends.onednn.matmul import matmul_block, number_attr, padder
from buildgen.backends.onednn.posts import BINARY_ALG, SWISH, eltwise_of, linear_of, step_posts
from buildgen.backends.onednn.resample import check_sampling
from buildgen.backends.onednn.rnn import RECURRENT
from buildgen.backends.onednn.rnn_block import rnn_block
from buildgen.codegen import cnames
from buildgen.ir import Graph, Node


def _pads_end(geo: Window) -> tuple[int, ...]:
    """ONNX's end pads when oneDNN's floor formula gives the output size, else the pads that
    do (ceil_mode)."""
    out = []
    for n, o, k, s, d, b, e in zip(geo.size, geo.out, geo.kernel, geo.strides, geo.dilations,
                                   geo.pads_begin, geo.pads_end, strict=True):
        span = (k - 1) * d + 1
        out.append(e if (n + b + e - span) // s + 1 == o else (o - 1) * s + span - n - b)
    return tuple(out)


def _window_fields(geo: Window, kernel: bool) -> list[tuple[str, str]]:
    fields = [("spatial", str(geo.rank)), ("strides", dims(geo.strides))]
    if kernel:
        fields.append(("kernel", dims(geo.kernel)))
    fields += [
        ("dilation" if kernel else "dilates", dims(d - 1 for d in geo.dilations)),
        ("pad_l", dims(geo.pads_begin)),
        ("pad_r", dims(_pads_end(geo))),
    ]
    return fields


FIRST_LAYER_CHANNELS = 4  # an image's RGB(A): oneDNN's direct kernel for NCHW input
POOLS = frozenset(("MaxPool", "AveragePool"))


def first_layer(layout: RegionLayout, graph: Graph, group: Group) -> bool:
    """Whether a Conv group is a CNN's first layer as bg_dnnl_conv_mds takes it: it reads a
    plain input of few channels, and poolings alone read its output, which may then be
    channel-blocked (they write channels-last again: `channels_last` in their spec)."""
    node = group.anchor
    if node is None or node.op != "Conv":
        return False
    x = graph.type_of(node.inputs[0]).shape
    readers = graph.consumers(group.output)
    return (
        len(x) >= 3 and x[1] <= FIRST_LAYER_CHANNELS
        and not layout.entry(node.inputs[0]).flexible and layout.entry(group.output).flexible
        and bool(readers) and all(n.op in POOLS for n in readers)
    )


def _after_first_layer(ctx: Context, tensor: str) -> bool:
    return any(g.output == tensor and first_layer(ctx.layout, ctx.graph, g)
               for g in ctx.layout.groups)


def _conv(ctx: Context, group: Group, node: Node) -> tuple[list[str], str, list[str]]:
    graph = ctx.graph
    x, w, y = (graph.type_of(t).shape for t in (node.inputs[0], node.inputs[1], node.outputs[0]))
    geo = window(node, x, y, w[2:])
    groups = x[1] // w[1]
    shape = (groups, w[0] // groups, *w[1:]) if groups > 1 else w
    bias = node.inputs[2] if len(node.inputs) > 2 else ""
    fields = [("src", ctx.layout.enum(node.inputs[0])), ("dst", ctx.layout.enum(group.output)),
              ("ndims", str(len(shape))), ("weights_dims", dims(shape)),
              ("weights", str(graph.weight(node.inputs[1]).offset))]
    steps: Sequence[Step] = group.steps
    notes = []
    if steps and isinstance(steps[0], Affine):
        # Fold the BatchNormalization: W'[o] = W[o] * scale[o], b' = b * scale + shift.
        scale, shift = bn_scale_shift(steps[0].node, ctx.weights)
        b = weight(ctx.weights, node, bias) if bias else np.zeros_like(shift)
        what = f"{steps[0].node.op} '{steps[0].node.name}'"
        fields += [("bias", ctx.array("bias", b * scale + shift, f"{what} folded: bias")),
                   ("bias_offset", "-1"), ("scale", ctx.array("scale", scale, f"{what}: scale")),
                   ("out_channels", str(w[0])), ("inner", str(prod(w[1:])))]
        notes.append(f"{what}: folded into the weights and bias")
        steps = steps[1:]
    elif bias:
        fields += [("bias", "NULL"), ("bias_offset", str(graph.weight(bias).offset))]
    else:
        fields += [("bias", "NULL"), ("bias_offset", "-1")]
    fields += _window_fields(geo, kernel=False)
    if first_layer(ctx.layout, graph, group):
        fields.append(("first_layer", "1"))
        notes.append("a first layer: reads the input as NCHW, writes the layout oneDNN picks")
    posts, arrays = step_posts(steps, ctx.layout, graph, ctx.weights, padder(len(y)), ctx.name,
                               sum_step(group, graph))
    ctx.arrays += arrays
    post_lines, post_args = posts_lines(posts)
    lines = [*spec("bg_dnnl_conv_spec", fields), *post_lines]
    return lines, f"bg_dnnl_conv(m, r, &spec, {post_args}", notes


def _unary_fields(ctx: Context, source: str, group: Group, plain: bool,
                  view: Sequence[int] = (), channels_last: bool = False) -> list[tuple[str, str]]:
    fields = [("src", ctx.layout.enum(source)), ("dst", ctx.layout.enum(group.output)),
              ("plain", str(int(plain)))]
    if channels_last:
        fields.append(("channels_last", "1"))
    if view:
        fields += [("ndims", str(len(view))), ("dims", dims(view))]
    return fields


def _pool(ctx: Context, group: Group, node: Node) -> tuple[list[str], str, list[str]]:
    x = ctx.graph.type_of(node.inputs[0]).shape
    y = ctx.graph.type_of(node.outputs[0]).shape
    if node.op.startswith("Global") or node.op == "ReduceMean":  # support.py: spatial axes
        geo = Window(x[2:], y[2:], x[2:], (1,) * (len(x) - 2), (1,) * (len(x) - 2),
                     (0,) * (len(x) - 2), (0,) * (len(x) - 2))
    else:
        kernel = node.attr("kernel_shape")
        assert isinstance(kernel, tuple)
        geo = window(node, x, y, tuple(int(k) for k in kernel))
    if "Max" in node.op:
        alg = "dnnl_pooling_max"
    elif node.attr("count_include_pad", 0) == 1:
        alg = "dnnl_pooling_avg_include_padding"
    else:
        alg = "dnnl_pooling_avg_exclude_padding"
    lines = [
        *spec("bg_dnnl_pool_spec", [("alg", alg), *_window_fields(geo, kernel=True)], "pool"),
        *spec("bg_dnnl_unary_spec", _unary_fields(
            ctx, node.inputs[0], group, False,
            channels_last=_after_first_layer(ctx, node.inputs[0]))),
    ]
    return lines, "bg_dnnl_unary(m, r, &spec, bg_dnnl_make_pool, &pool, NULL, 0, NULL, 0", []


def _lrn(ctx: Context, group: Group, node: Node) -> tuple[list[str], str, list[str]]:
    """LRN across channels: oneDNN's alpha is divided by the size, as ONNX's is."""
    fields = [("size", str(node.attr("size"))),
              *((name, float_literal(number_attr(node, name, default)))
                for name, default in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))]
    lines = [*spec("bg_dnnl_lrn_spec", fields, "lrn"),
             *spec("bg_dnnl_unary_spec", _unary_fields(ctx, node.inputs[0], group, False))]
    return lines, "bg_dnnl_unary(m, r, &spec, bg_dnnl_make_lrn, &lrn, NULL, 0, NULL, 0", []


def _resample(ctx: Context, group: Group, node: Node) -> tuple[list[str], str, list[str]]:
    alg = check_sampling(node, ctx.graph, ctx.weights)
    lines = [*spec("bg_dnnl_resampling_spec", [("alg", alg)], "resampling"),
             *spec("bg_dnnl_unary_spec", _unary_fields(ctx, node.inputs[0], group, False))]
    return lines, ("bg_dnnl_unary(m, r, &spec, bg_dnnl_make_resampling, &resampling, NULL, 0, "
                   "NULL, 0"), []


def _concat(ctx: Context, group: Group, node: Node) -> tuple[list[str], str, list[str]]:
    rank = ctx.graph.type_of(node.outputs[0]).rank
    axis = node.attr("axis")
    assert isinstance(axis, int)
    sources = ", ".join(ctx.layout.enum(t) for t in node.inputs if t)
    lines = [f"static const int srcs[] = {{{sources}}};",
             *spec("bg_dnnl_concat_spec", [("n", str(sum(1 for t in node.inputs if t))),
                                           ("axis", str(axis % rank)), ("srcs", "srcs"),
                                           ("dst", ctx.layout.enum(group.output))])]
    return lines, "bg_dnnl_concat(m, r, &spec", []


def _split(ctx: Context, group: Group, node: Node) -> tuple[list[str], str, list[str]]:
    """Each output a reorder from a view of its slice (sizes from the outputs' shapes)."""
    rank = ctx.graph.type_of(node.inputs[0]).rank
    axis = node.attr("axis", 0)
    assert isinstance(axis, int)
    dsts = ", ".join(ctx.layout.enum(t) for t in node.outputs)
    lines = [f"static const int dsts[] = {{{dsts}}};",
             *spec("bg_dnnl_split_spec", [("src", ctx.layout.enum(node.inputs[0])),
                                          ("axis", str(axis % rank)),
                                          ("n", str(len(node.outputs))), ("dsts", "dsts")])]
    return lines, "bg_dnnl_split(m, r, &spec", []


def _two_d(shape: Sequence[int], axis: int) -> tuple[int, int]:
    return prod(shape[:axis]), prod(shape[axis:])


def _norm(ctx: Context, group: Group, node: Node) -> tuple[list[str], str, list[str]]:
    shape = ctx.graph.type_of(node.inputs[0]).shape
    axis = node.attr("axis", -1 if node.op == "LayerNormalization" or ctx.graph.opset >= 13 else 1)
    assert isinstance(axis, int)
    axis %= max(len(shape), 1)
    if node.op == "LayerNormalization":
        scale = ctx.graph.weight(node.inputs[1]).offset
        bias = node.inputs[2] if len(node.inputs) > 2 else ""
        shift = ctx.graph.weight(bias).offset if bias else -1
        eps = float(node.attr("epsilon", 1e-5))  # type: ignore[arg-type]
        norm = [("epsilon", float_literal(eps)), ("scale", str(scale)), ("shift", str(shift))]
        lines = [*spec("bg_dnnl_lnorm_spec", norm, "norm"),
                 *spec("bg_dnnl_unary_spec", _unary_fields(
                     ctx, node.inputs[0], group, True, _two_d(shape, axis)))]
        return lines, "bg_dnnl_lnorm(m, r, &spec, &norm", []
    view: Sequence[int] = shape
    if ctx.graph.opset < 13:  # Softmax-11 flattens to 2-D around the axis
        view, axis = _two_d(shape, axis), 1
    alg = "dnnl_softmax_log" if node.op == "LogSoftmax" else "dnnl_softmax_accurate"
    lines = [*spec("bg_dnnl_softmax_spec", [("alg", alg), ("axis", str(axis))], "softmax"),
             *spec("bg_dnnl_unary_spec", _unary_fields(ctx, node.inputs[0], group, True, view))]
    return lines, ("bg_dnnl_unary(m, r, &spec, bg_dnnl_make_softmax, &softmax, NULL, 0, "
                   "NULL, 0"), []


def _shuffle(ctx: Context, group: Group, step: Shuffle) -> tuple[list[str], str, list[str]]:
    """A channel shuffle into g groups: oneDNN's shuffle of group size channels / g."""
    channels = ctx.graph.type_of(group.source).shape[1]
    fields = [("axis", "1"), ("group_size", str(channels // step.match.groups))]
    lines = [*spec("bg_dnnl_shuffle_spec", fields, "shuffle"),
             *spec("bg_dnnl_unary_spec", _unary_fields(ctx, group.source, group, False))]
    return lines, ("bg_dnnl_unary(m, r, &spec, bg_dnnl_make_shuffle, &shuffle, NULL, 0, "
                   "NULL, 0"), [f"a channel shuffle into {step.match.groups} groups"]


def _standalone(ctx: Context, group: Group) -> tuple[list[str], str, list[str]]:
    """Steps whose anchor runs elsewhere: the first as an eltwise or binary primitive, the
    rest as its post-ops."""
    first, rest = group.steps[0], group.steps[1:]
    if isinstance(first, Shuffle):
        return _shuffle(ctx, group, first)
    rank = padder(ctx.graph.type_of(group.output).rank)
    more, arrays = step_posts(rest, ctx.layout, ctx.graph, ctx.weights, rank, ctx.name)
    ctx.arrays += arrays
    unary = spec("bg_dnnl_unary_spec", _unary_fields(ctx, group.source, group, False))
    value = scalar_operand(first, ctx.graph, ctx.weights) if isinstance(first, Binary) else None
    if isinstance(first, (Act, Gelu, Swish)) or value is not None:
        if isinstance(first, Gelu):
            alg, alpha, beta = "dnnl_eltwise_gelu_erf", 0.0, 0.0
        elif isinstance(first, Swish):
            alg, alpha, beta = SWISH
        elif isinstance(first, Act):
            alg, alpha, beta = eltwise_of(first, ctx.weights)
        else:
            assert isinstance(first, Binary) and value is not None
            alg, (alpha, beta) = "dnnl_eltwise_linear", linear_of(first, value)
        fields = [("alg", alg), ("alpha", float_literal(alpha)), ("beta", float_literal(beta))]
        post_lines, post_args = posts_lines(more)
        lines = [*spec("bg_dnnl_eltwise_spec", fields, "eltwise"), *unary, *post_lines]
        call = "bg_dnnl_unary(m, r, &spec, bg_dnnl_make_eltwise, &eltwise, NULL, 0, "
        return lines, call + post_args, []
    if isinstance(first, Affine):
        posts, arrays = step_posts([first], ctx.layout, ctx.graph, ctx.weights, rank, ctx.name)
        ctx.arrays += arrays
        operand, more = posts[0], [posts[1], *more]
    else:
        assert isinstance(first, Binary)
        (operand,), _ = step_posts([first], ctx.layout, ctx.graph, ctx.weights, rank, ctx.name)
        assert dict(operand.fields)["alg"] == BINARY_ALG[first.op]
    post_lines, post_args = posts_lines(more)
    lines = [*unary, f"static const bg_dnnl_post operand = {operand.initializer};", *post_lines]
    return lines, f"bg_dnnl_binary(m, r, &spec, &operand, {post_args}", []


def group_block(group: Group, index: int, layout: RegionLayout, graph: Graph,
                weights: Mapping[str, np.ndarray] | None) -> Block:
    ctx = Context(layout, graph, weights, f"k{index}", [])
    anchor = group.anchor
    if anchor is None:
        body, call, notes = _standalone(ctx, group)
    elif anchor.op == "Conv":
        body, call, notes = _conv(ctx, group, anchor)
    elif anchor.op in ("MatMul", "Gemm"):
        body, call, notes = matmul_block(ctx, group, anchor)
    elif anchor.op in ("Softmax", "LogSoftmax", "LayerNormalization"):
        body, call, notes = _norm(ctx, group, anchor)
    elif anchor.op == "LRN":
        body, call, notes = _lrn(ctx, group, anchor)
    elif anchor.op == "Concat":
        body, call, notes = _concat(ctx, group, anchor)
    elif anchor.op == "Split":
        body, call, notes = _split(ctx, group, anchor)
    elif anchor.op in ("Resize", "Upsample"):
        body, call, notes = _resample(ctx, group, anchor)
    elif anchor.op in RECURRENT:
        body, call, notes = rnn_block(ctx, group, anchor)
    else:
        body, call, notes = _pool(ctx, group, anchor)
    first = group.first
    what = cnames.c_string(f"k{index} {first.op} '{first.name}'")
    head = [f"/* k{index}: " + comment(_node_text(graph, group.nodes[0]))]
    head += [" *   then " + comment(_node_text(graph, n)) for n in group.nodes[1:]]
    head += [f" *   ({comment(note)})" for note in notes]
    head[-1] += " */"
    lines = ["{", *(f"    {h}" for h in head), *(f"    {b}" for b in body),
             f"    if ({call}, {what}) != 0) return -1;", "}"]
    return Block(tuple(lines), tuple(ctx.arrays))


def _node_text(graph: Graph, node: Node) -> str:
    ins = ", ".join(f"{t}{shape_text(graph.type_of(t).shape)}" for t in node.inputs if t)
    out = node.outputs[0]
    return f"{node.op} '{node.name}': {ins} -> {out}{shape_text(graph.type_of(out).shape)}"
