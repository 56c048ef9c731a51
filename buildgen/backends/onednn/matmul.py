"""MatMul and Gemm groups of a oneDNN region: an inner product when the weights are a
constant matrix (oneDNN blocks them once at create; its AVX2/AVX-512 kernels beat matmul's,
which repacks them on every call), else a matmul, with batch broadcast and the operands'
transposes as strides. Bias and Gemm's C become the primitive's bias where they are one row,
alpha is folded into constant weights; the rest of the chain is post-ops."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import numpy as np

from buildgen.backends.c.cwriter import float_literal
from buildgen.backends.cpu_common.groups import Group
from buildgen.backends.cpu_common.steps import Affine, Binary, Step
from buildgen.backends.cpu_common.values import weight
from buildgen.backends.onednn.blocks import Context, dims, posts_lines, spec
from buildgen.backends.onednn.posts import Post, ShapeOf, dims_text, padded, step_posts
from buildgen.ir import Graph, Node


def _matmul_dims(graph: Graph, node: Node) -> tuple[tuple[int, ...], ...]:
    a, b = (graph.type_of(t).shape for t in node.inputs[:2])
    a2 = a if len(a) > 1 else (1, *a)
    rank = max(len(a2), len(b))
    src = (1,) * (rank - len(a2)) + a2
    wei = (1,) * (rank - len(b)) + b
    batch = tuple(int(d) for d in np.broadcast_shapes(src[:-2], wei[:-2]))
    return src, wei, (*batch, src[-2], wei[-1])


def _is_bias(graph: Graph, step: Step, columns: int) -> bool:
    if not isinstance(step, Binary) or step.op != "Add" or not graph.is_weight(step.other):
        return False
    shape = graph.type_of(step.other).shape
    return bool(shape) and shape[-1] == columns and all(d == 1 for d in shape[:-1])


def padder(rank: int) -> ShapeOf:
    return lambda shape: padded(shape, rank)


def _rows_folder(dst: tuple[int, ...]) -> ShapeOf:
    """For an inner product over dst's leading dims folded into rows: the operand's view; a
    ValueError when it broadcasts along only part of them (it cannot be folded)."""
    rows = prod(dst[:-1])

    def fold(shape: Sequence[int]) -> tuple[int, ...]:
        full = padded(shape, len(dst))
        if all(d == 1 for d in full[:-1]):
            return (1, full[-1])
        if tuple(full[:-1]) == dst[:-1]:
            return (rows, full[-1])
        raise ValueError(shape)

    return fold


def _foldable(graph: Graph, group: Group, fold: ShapeOf) -> bool:
    for step in group.steps:
        if isinstance(step, Affine) and len(graph.type_of(group.output).shape) > 2:
            return False  # its channels are dim 1, which folding mixes into the rows
        if isinstance(step, Binary):
            try:
                fold(graph.type_of(step.other).shape)
            except ValueError:
                return False
    return True


def matmul_block(ctx: Context, group: Group, node: Node) -> tuple[list[str], str, list[str]]:
    graph = ctx.graph
    gemm = node.op == "Gemm"
    src: tuple[int, ...]
    wei: tuple[int, ...]
    dst: tuple[int, ...]
    ta = tb = False
    if gemm:
        a_shape = graph.type_of(node.inputs[0]).shape
        ta, tb = node.attr("transA", 0) == 1, node.attr("transB", 0) == 1
        m, n = graph.type_of(node.outputs[0]).shape
        k = a_shape[0] if ta else a_shape[1]
        src, wei, dst = (m, k), (k, n), (m, n)
    else:
        src, wei, dst = _matmul_dims(graph, node)
    b = node.inputs[1]
    constant = graph.is_weight(b)
    shape_of = padder(len(dst))
    inner_product = constant and not ta and graph.type_of(b).rank == 2
    if inner_product and len(dst) > 2:
        fold = _rows_folder(dst)
        inner_product = _foldable(graph, group, fold)
        if inner_product:
            shape_of = fold
            src, wei, dst = (prod(src[:-1]), src[-1]), wei[-2:], (prod(dst[:-1]), dst[-1])
    rank = len(dst)
    fields = [("inner_product", str(int(inner_product))),
              ("src", ctx.layout.enum(node.inputs[0])), ("dst", ctx.layout.enum(group.output)),
              ("ndims", str(rank)), ("src_dims", dims(src)), ("weights_dims", dims(wei)),
              ("dst_dims", dims(dst)), ("transpose_src", str(int(ta))),
              ("transpose_weights", str(int(tb)))]
    if constant:
        fields += [("weights_tensor", "-1"), ("weights", str(graph.weight(b).offset))]
    else:
        fields += [("weights_tensor", ctx.layout.enum(b)), ("weights", "-1")]
    posts: list[Post] = []
    steps: list[Step] = list(group.steps)
    alpha = number_attr(node, "alpha", 1.0) if gemm else 1.0
    if alpha != 1.0 and constant:
        fields += [("scale", ctx.array("alpha", [alpha], "Gemm alpha, folded into the weights")),
                   ("channels", "1"), ("inner", "1")]
    elif alpha != 1.0:
        posts.append(Post((("kind", "BG_DNNL_ELTWISE"), ("alg", "dnnl_eltwise_linear"),
                           ("alpha", float_literal(alpha)), ("tensor", "-1")), "Gemm alpha"))
    bias_fields: list[tuple[str, str]] = [("bias", "NULL"), ("bias_offset", "-1")]
    if gemm:
        bias_fields, c_posts = _gemm_c(ctx, node, shape_of, dst[-1], bool(posts))
        posts += c_posts
    elif steps and _is_bias(graph, steps[0], dst[-1]):
        bias = steps.pop(0)
        assert isinstance(bias, Binary)
        bias_fields = [("bias", "NULL"), ("bias_offset", str(graph.weight(bias.other).offset)),
                       ("bias_dims", dims_text(padded((dst[-1],), rank)))]
    fields += bias_fields
    more, arrays = step_posts(steps, ctx.layout, graph, ctx.weights, shape_of, ctx.name)
    ctx.arrays += arrays
    post_lines, post_args = posts_lines([*posts, *more])
    notes = ["an inner product: weights blocked once at create"] if inner_product else []
    return ([*spec("bg_dnnl_matmul_spec", fields), *post_lines],
            f"bg_dnnl_matmul(m, r, &spec, {post_args}", notes)


def number_attr(node: Node, name: str, default: float) -> float:
    value = node.attr(name, default)
    assert isinstance(value, (int, float))
    return float(value)


def _gemm_c(ctx: Context, node: Node, shape_of: ShapeOf, n: int, after_posts: bool
            ) -> tuple[list[tuple[str, str]], list[Post]]:
    """Gemm's beta * C: the primitive's bias when it is one row, else a BINARY add."""
    graph = ctx.graph
    none = [("bias", "NULL"), ("bias_offset", "-1")]
    c = node.inputs[2] if len(node.inputs) > 2 else ""
    beta = number_attr(node, "beta", 1.0)
    if not c or beta == 0.0:
        return none, []
    shape = graph.type_of(c).shape
    what = f"Gemm C '{c}'"
    fields: tuple[tuple[str, str], ...]
    if graph.is_weight(c):
        if beta == 1.0:
            source = ("NULL", str(graph.weight(c).offset))
        else:
            values = (beta * weight(ctx.weights, node, c)).reshape(-1)
            source = (ctx.array("c", values, f"{what} times beta"), "-1")
        if shape in ((n,), (1, n)) and not after_posts:
            return [("bias", source[0]), ("bias_offset", source[1]),
                    ("bias_dims", dims_text((1, n)))], []
        fields = (("tensor", "-1"), ("array", source[0]), ("offset", source[1]))
    else:
        fields = (("tensor", ctx.layout.enum(c)),)
    dims = shape_of(shape)
    post = Post((("kind", "BG_DNNL_BINARY"), ("alg", "dnnl_binary_add"), *fields,
                 ("ndims", str(len(dims))), ("dims", dims_text(dims))), what)
    return none, [post]


