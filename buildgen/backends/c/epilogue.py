"""Folding a bias add, an activation and (after a Conv) an inference BatchNormalization into
bg_sgemm / bg_conv2d (their bg_epilogue).

fusion.py asks `bias_of` and `activation_of` whether the next node can be absorbed; the
matmul and conv emitters call the same functions to fill the bg_epilogue, so the decision
and the generated struct cannot disagree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from buildgen.backends.c.cwriter import Code, float_literal
from buildgen.backends.c.kernel import LowerContext
from buildgen.backends.c.ops.common import float_attr, input_at, int_attr
from buildgen.ir import DType, Node

EPILOGUE_ANCHORS = ("MatMul", "Gemm", "Conv")


@dataclass(frozen=True)
class Activation:
    act: str  # enum bg_act name
    alpha: float = 0.0
    beta: float = 0.0


@dataclass(frozen=True)
class Epilogue:
    bias: str = ""  # tensor holding the bias vector, "" for none
    bias_axis: int = 0  # 0: per column (N, or the conv channel), 1: per row (M)
    activation: Activation = Activation("BG_ACT_NONE")
    scale: float = 1.0  # folded into the GEMM's alpha (MatMul/Gemm only)
    # An inference BatchNormalization folded in (Conv only): its per-channel scale and
    # shift replace the bias, computed at create (bg_batchnorm_fold)
    batchnorm: Node | None = None

    def declare(self, code: Code, bias_param: str = "bias", scale_param: str = "") -> str:
        """Declare `ep` in a kernel body if it does anything; returns the pointer to pass.
        Fields left out of the designated initializer are zero (BG_ACT_NONE, per column).
        bias_param / scale_param: C expressions of the bias and (folded) scale vectors."""
        a = self.activation
        fields = [f".bias = {bias_param}"] if self.bias or self.batchnorm else []
        if self.batchnorm:
            fields.append(f".scale = {scale_param}")
        if self.bias and self.bias_axis:
            fields.append(f".bias_axis = {self.bias_axis}")
        if a.act != "BG_ACT_NONE":
            fields.append(f".act = {a.act}")
        if a.act in ("BG_ACT_LEAKY_RELU", "BG_ACT_CLIP"):
            fields.append(f".act_alpha = {float_literal(a.alpha)}")
        if a.act == "BG_ACT_CLIP":
            fields.append(f".act_beta = {float_literal(a.beta)}")
        if not fields:
            return "NULL"
        code.line(f"const bg_epilogue ep = {{{', '.join(fields)}}};")
        return "&ep"


def _clip_bound(
    ctx: LowerContext, node: Node, index: int, attr: str, default: float
) -> float | None:
    name = input_at(node, index)
    if name:
        if not ctx.known(name) or ctx.graph.type_of(name).numel != 1:
            return None
        return float(ctx.values(name, node)[0])
    return float_attr(node, attr, default)


def activation_of(ctx: LowerContext, node: Node) -> Activation | None:
    """The bg_act that computes `node`, or None if it has none."""
    if node.op == "Relu":
        return Activation("BG_ACT_RELU")
    if node.op == "LeakyRelu":
        return Activation("BG_ACT_LEAKY_RELU", float_attr(node, "alpha", 0.01))
    if node.op == "Sigmoid":
        return Activation("BG_ACT_SIGMOID")
    if node.op == "Tanh":
        return Activation("BG_ACT_TANH")
    if node.op == "HardSwish":  # PP-LCNet and MobileNetV3 end their convolutions so
        return Activation("BG_ACT_HARDSWISH")
    if node.op == "Clip" and ctx.dtype(node.inputs[0]) == DType.FLOAT32:
        lo = _clip_bound(ctx, node, 1, "min", -math.inf)
        hi = _clip_bound(ctx, node, 2, "max", math.inf)
        if lo is None or hi is None:
            return None
        return Activation("BG_ACT_CLIP", lo, hi)
    return None


def bias_of(ctx: LowerContext, anchor: Node, add: Node, produced: str) -> tuple[str, int] | None:
    """(bias tensor, bias_axis) if `add` adds a vector to `produced` (the anchor's result)
    along the axis bg_epilogue supports, without changing the shape."""
    if add.op != "Add" or len(add.inputs) != 2 or add.inputs.count(produced) != 1:
        return None
    bias = add.inputs[1] if add.inputs[0] == produced else add.inputs[0]
    out_shape = ctx.shape(produced)
    if ctx.shape(add.outputs[0]) != out_shape or ctx.dtype(bias) != DType.FLOAT32:
        return None
    shape = ctx.shape(bias)
    if len(shape) > len(out_shape) or not out_shape:
        return None
    if anchor.op == "Conv":
        if input_at(anchor, 2) or len(out_shape) < 2:
            return None
        channel = len(shape) - (len(out_shape) - 1)  # where the channel dim sits in `shape`
        return (bias, 0) if _only_dim(shape, channel, out_shape[1]) else None
    if anchor.op == "Gemm" and input_at(anchor, 2):
        return None
    if anchor.op == "MatMul" and ctx.graph.type_of(anchor.inputs[1]).rank < 2:
        return None  # A @ b (a vector) leaves no N axis for a per-column bias
    if _only_dim(shape, len(shape) - 1, out_shape[-1]):
        return bias, 0
    if anchor.op == "Gemm" and _only_dim(shape, len(shape) - 2, out_shape[-2]):
        return bias, 1
    return None


def _only_dim(shape: Sequence[int], axis: int, extent: int) -> bool:
    """All dims are 1 except `axis`, which is `extent`."""
    if not 0 <= axis < len(shape):
        return extent == 1 and all(d == 1 for d in shape)
    return shape[axis] == extent and all(d == 1 for i, d in enumerate(shape) if i != axis)


def scale_of(ctx: LowerContext, anchor: Node, node: Node, produced: str) -> float | None:
    """The factor if `node` multiplies (or divides) the GEMM result `produced` by a constant
    scalar, which bg_sgemm's alpha can do (Conv has no alpha; Gemm only without C)."""
    if anchor.op not in ("MatMul", "Gemm") or (anchor.op == "Gemm" and input_at(anchor, 2)):
        return None
    if node.op not in ("Mul", "Div") or len(node.inputs) != 2 or node.inputs.count(produced) != 1:
        return None
    if node.op == "Div" and node.inputs[0] != produced:
        return None
    other = node.inputs[1] if node.inputs[0] == produced else node.inputs[0]
    if (
        ctx.dtype(other) != DType.FLOAT32
        or ctx.graph.type_of(other).numel != 1
        or not ctx.known(other)
    ):
        return None
    if ctx.shape(node.outputs[0]) != ctx.shape(produced):
        return None
    value = float(ctx.values(other, node)[0])
    if node.op == "Div":
        return 1.0 / value if value != 0.0 and math.isfinite(value) else None
    return value if math.isfinite(value) else None


def batchnorm_of(ctx: LowerContext, anchor: Node, node: Node, produced: str) -> bool:
    """Whether `node` is an inference BatchNormalization of the Conv result `produced` whose
    statistics are weights, which the Conv's epilogue can compute (bg_batchnorm_fold)."""
    if anchor.op != "Conv" or node.op != "BatchNormalization" or node.inputs[0] != produced:
        return False
    if int_attr(node, "training_mode", 0) or len([o for o in node.outputs if o]) != 1:
        return False
    conv_bias = input_at(anchor, 2)
    if conv_bias and not ctx.graph.is_weight(conv_bias):
        return False  # folded into the shift at create, so it must be a weight
    channels = ctx.shape(produced)[1] if len(ctx.shape(produced)) >= 2 else -1
    return ctx.shape(node.outputs[0]) == ctx.shape(produced) and all(
        ctx.graph.is_weight(t) and ctx.dtype(t) == DType.FLOAT32 and ctx.shape(t) == (channels,)
        for t in node.inputs[1:5]
    )


def build_epilogue(ctx: LowerContext, anchor: Node, absorbed: Sequence[Node]) -> Epilogue:
    """The epilogue for the nodes fusion.py absorbed after `anchor`, in this order, each
    optional: a scalar scale or a folded BatchNormalization, a bias add, an activation."""
    produced = anchor.outputs[0]
    bias, axis, act, scale = "", 0, Activation("BG_ACT_NONE"), 1.0
    batchnorm: Node | None = None
    for node in absorbed:
        untouched = not bias and act.act == "BG_ACT_NONE" and batchnorm is None
        factor = scale_of(ctx, anchor, node, produced) if untouched and scale == 1.0 else None
        found = bias_of(ctx, anchor, node, produced) if untouched else None
        if untouched and batchnorm_of(ctx, anchor, node, produced):
            batchnorm = node
        elif factor is not None:
            scale = factor
        elif found:
            bias, axis = found
        else:
            activation = activation_of(ctx, node)
            assert activation is not None, f"fusion absorbed {node.op} that is no epilogue"
            act = activation
        produced = node.outputs[0]
    return Epilogue(bias, axis, act, scale, batchnorm)
