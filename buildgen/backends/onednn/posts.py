"""A group's fused steps as oneDNN post-ops, written as `bg_dnnl_post` initializers.

    activation                 ELTWISE with the matching oneDNN algorithm
    Add/Sub/Mul/Div scalar     ELTWISE linear (alpha * x + beta)
    ... of a weight            BINARY with the weight in place (broadcast dims are 1)
    ... of a tensor            BINARY reading it; a Conv's residual Add is a SUM instead
    BatchNormalization         BINARY mul by its scale then BINARY add of its shift, both
                               static arrays computed here (a Conv folds it instead)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from buildgen.backends.c.cwriter import float_literal
from buildgen.backends.cpu_common.carrays import StaticArray
from buildgen.backends.cpu_common.steps import Act, Affine, Binary, Gelu, Shuffle, Step, Swish
from buildgen.backends.cpu_common.values import act_params, bn_scale_shift, scalar_operand
from buildgen.backends.onednn.layout import RegionLayout
from buildgen.ir import Graph

_ELTWISE = {
    "Relu": "dnnl_eltwise_relu",
    "LeakyRelu": "dnnl_eltwise_relu",  # alpha: the negative slope
    "Clip": "dnnl_eltwise_clip_v2",
    "Sigmoid": "dnnl_eltwise_logistic",
    "Tanh": "dnnl_eltwise_tanh",
    "HardSigmoid": "dnnl_eltwise_hardsigmoid",
    "HardSwish": "dnnl_eltwise_hardswish",
    "Elu": "dnnl_eltwise_elu",
    "Softplus": "dnnl_eltwise_soft_relu",
    "Gelu": "dnnl_eltwise_gelu_erf",
    "Mish": "dnnl_eltwise_mish",
    "Abs": "dnnl_eltwise_abs",
    "Neg": "dnnl_eltwise_linear",
    "Sqrt": "dnnl_eltwise_sqrt",
    "Exp": "dnnl_eltwise_exp",
}
BINARY_ALG = {"Add": "dnnl_binary_add", "Sub": "dnnl_binary_sub", "Mul": "dnnl_binary_mul",
              "Div": "dnnl_binary_div"}


@dataclass(frozen=True)
class Post:
    fields: tuple[tuple[str, str], ...]  # designated initializer fields, in order
    what: str  # which ONNX node it comes from

    @property
    def initializer(self) -> str:
        return "{" + ", ".join(f".{k} = {v}" for k, v in self.fields) + "}"


def eltwise_of(step: Act, weights: Mapping[str, np.ndarray] | None) -> tuple[str, float, float]:
    """(oneDNN algorithm, alpha, beta) of an activation."""
    op = step.node.op
    alpha, beta = act_params(step.node, weights)
    if op == "HardSwish":
        return _ELTWISE[op], 1.0 / 6.0, 0.5
    if op == "Softplus":
        return _ELTWISE[op], 1.0, 0.0
    if op == "Neg":
        return _ELTWISE[op], -1.0, 0.0
    if op == "Gelu" and step.node.attr("approximate", "none") == "tanh":
        return "dnnl_eltwise_gelu_tanh", 0.0, 0.0
    return _ELTWISE[op], alpha, beta


def _gelu_what(step: Gelu) -> str:
    first, last = step.match.nodes[0], step.match.nodes[-1]
    return f"GELU (erf) of 5 nodes '{first.name}' .. '{last.name}'"


# x * sigmoid(alpha * x) with alpha 1: SiLU
SWISH = ("dnnl_eltwise_swish", 1.0, 0.0)


def _swish_what(step: Swish) -> str:
    sigmoid, mul = step.match.nodes
    return f"SiLU of Sigmoid '{sigmoid.name}' and Mul '{mul.name}'"


def linear_of(step: Binary, value: float) -> tuple[float, float]:
    """(alpha, beta) of alpha * x + beta computing x (op) value."""
    return {
        "Add": (1.0, value),
        "Sub": (1.0, -value),
        "Mul": (value, 0.0),
        "Div": (1.0 / value, 0.0),
    }[step.op]


def _eltwise(alg: str, alpha: float, beta: float, what: str) -> Post:
    return Post((("kind", "BG_DNNL_ELTWISE"), ("alg", alg), ("alpha", float_literal(alpha)),
                 ("beta", float_literal(beta)), ("tensor", "-1")), what)


def padded(shape: Sequence[int], rank: int) -> tuple[int, ...]:
    return (1,) * (rank - len(shape)) + tuple(shape)


def dims_text(dims: Sequence[int]) -> str:
    return "{" + ", ".join(str(d) for d in dims) + "}"


# How an operand's ONNX shape is viewed next to the primitive's dst (leading 1s, or the
# leading dims folded into rows for an inner product).
ShapeOf = Callable[[Sequence[int]], tuple[int, ...]]


def _binary(alg: str, dims: Sequence[int], source: tuple[tuple[str, str], ...],
            what: str, kind: str = "BG_DNNL_BINARY") -> Post:
    fields = (("kind", kind), ("alg", alg), *source, ("ndims", str(len(dims))),
              ("dims", dims_text(dims)))
    return Post(fields, what)


def _channel_shape(rank: int, channels: int) -> tuple[int, ...]:
    return (1, channels) + (1,) * (rank - 2)


def step_posts(
    steps: Sequence[Step],
    layout: RegionLayout,
    graph: Graph,
    weights: Mapping[str, np.ndarray] | None,
    shape_of: ShapeOf,
    prefix: str,
    residual: Binary | None = None,
) -> tuple[list[Post], list[StaticArray]]:
    """Posts for `steps`, operands viewed by `shape_of`; `residual` is the step done by a SUM
    post-op. BatchNormalization constants become static arrays named after `prefix`."""
    posts: list[Post] = []
    arrays: list[StaticArray] = []
    for step in steps:
        what = f"{step.node.op} '{step.node.name}'"
        if isinstance(step, Act):
            posts.append(_eltwise(*eltwise_of(step, weights), what))
        elif isinstance(step, Gelu):
            posts.append(_eltwise("dnnl_eltwise_gelu_erf", 0.0, 0.0, _gelu_what(step)))
        elif isinstance(step, Swish):
            posts.append(_eltwise(*SWISH, _swish_what(step)))
        elif isinstance(step, Shuffle):  # groups.py keeps it a group of its own
            raise AssertionError(f"{what}: a channel shuffle is no post-op")
        elif isinstance(step, Affine):
            scale, shift = bn_scale_shift(step.node, weights)
            base = f"{prefix}_bn{len(arrays) // 2}"
            arrays += [StaticArray(f"{base}_scale", tuple(map(float, scale)), f"{what}: scale"),
                       StaticArray(f"{base}_shift", tuple(map(float, shift)), f"{what}: shift")]
            rank = graph.type_of(step.node.inputs[0]).rank
            dims = shape_of(_channel_shape(rank, len(scale)))
            for name, alg in ((f"{base}_scale", "dnnl_binary_mul"), (f"{base}_shift",
                                                                     "dnnl_binary_add")):
                source = (("tensor", "-1"), ("array", name), ("offset", "-1"))
                posts.append(_binary(alg, dims, source, what))
        else:
            is_sum = step is residual
            posts.append(_binary_post(step, layout, graph, weights, shape_of, is_sum, what))
    return posts, arrays


def _binary_post(step: Binary, layout: RegionLayout, graph: Graph,
                 weights: Mapping[str, np.ndarray] | None, shape_of: ShapeOf, is_sum: bool,
                 what: str) -> Post:
    value = scalar_operand(step, graph, weights)
    if value is not None:
        return _eltwise("dnnl_eltwise_linear", *linear_of(step, value), what)
    shape = graph.type_of(step.other).shape
    source: tuple[tuple[str, str], ...]
    if graph.is_weight(step.other):
        source = (("tensor", "-1"), ("array", "NULL"),
                  ("offset", str(graph.weight(step.other).offset)))
    else:
        source = (("tensor", layout.enum(step.other)),)
    if is_sum:
        post = _binary("0", shape_of(shape), source, what, kind="BG_DNNL_SUM")
        in_place = any(r == step.other for _, r in layout.in_place)
        return Post((*post.fields, ("in_place", str(int(in_place)))), what)
    return _binary(BINARY_ALG[step.op], shape_of(shape), source, what)
