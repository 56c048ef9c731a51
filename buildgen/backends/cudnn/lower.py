"""One group of a cudnn region as the cuDNN calls that run it.

A convolution absorbs the start of its chain where cuDNN computes it:
  * an inference BatchNormalization right after it is folded: the weights are scaled per
    output channel once, at create (a kernel of the module writes the scaled copy), and the
    bias becomes b * scale + shift, a constant of the module;
  * then an Add of a per-channel constant joins that bias (computed at codegen);
  * then a ReLU, maybe after an Add of a same-shaped tensor (a residual):
    cudnnConvolutionBiasActivationForward computes relu(conv + residual + bias) in one
    call. Without one, cudnnConvolutionForward then cudnnAddTensor for the bias.
The steps left run in the group's epilogue kernel (buildgen.backends.gpu_epilogue), as does
a group whose anchor ran elsewhere. Pools and softmaxes are one call each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from buildgen.backends.c.cwriter import broadcast_strides
from buildgen.backends.cpu_common.carrays import StaticArray
from buildgen.backends.cpu_common.geometry import Window
from buildgen.backends.cpu_common.groups import Group
from buildgen.backends.cpu_common.steps import Act, Affine, Binary, Step
from buildgen.backends.cpu_common.values import bn_scale_shift, weight
from buildgen.backends.cudnn.support import node_window, planar, planar_window, softmax_view
from buildgen.backends.gpu_epilogue import Epilogue, StandaloneCall, epilogue_for
from buildgen.ir import Graph, Node


@dataclass(frozen=True)
class ConvCall:
    index: int
    group: Group
    x: str
    w: str  # the weight tensor (scaled at create when `scale` is set)
    output: str
    x_shape: tuple[int, ...]  # N, C, H, W (H = 1 for a 1-D convolution)
    w_shape: tuple[int, ...]  # K, C / groups, R, S
    y_shape: tuple[int, ...]  # N, K, P, Q
    geo: Window
    groups: int
    scale: StaticArray | None  # per-output-channel weight scale (a folded BatchNormalization)
    bias: StaticArray | None  # a bias the module holds (folded), else...
    bias_weight: str | None  # ...the Conv's own bias weight, else no bias
    relu: bool  # cudnnConvolutionBiasActivationForward with CUDNN_ACTIVATION_RELU
    residual: str | None  # a tensor that call adds before the ReLU (its z, alpha2 = 1)
    fused: tuple[str, ...]  # what cuDNN computes besides the convolution, for comments
    epilogue: Epilogue | None

    @property
    def name(self) -> str:
        return f"k{self.index}"


@dataclass(frozen=True)
class PoolCall:
    index: int
    group: Group
    x: str
    output: str
    x_shape: tuple[int, ...]
    y_shape: tuple[int, ...]
    geo: Window
    mode: str  # a cudnnPoolingMode_t

    @property
    def name(self) -> str:
        return f"k{self.index}"


@dataclass(frozen=True)
class SoftmaxCall:
    index: int
    group: Group
    x: str
    output: str
    view: tuple[int, int, int]  # (outer, axis, inner) as NCHW (outer, axis, inner, 1)
    algorithm: str  # CUDNN_SOFTMAX_ACCURATE or CUDNN_SOFTMAX_LOG

    @property
    def name(self) -> str:
        return f"k{self.index}"


Call = ConvCall | PoolCall | SoftmaxCall | StandaloneCall


def _per_channel(graph: Graph, name: str, out: tuple[int, ...]) -> bool:
    """A constant that broadcasts along the output's channel dim only."""
    if not graph.is_weight(name):
        return False
    strides = broadcast_strides(graph.type_of(name).shape, out)
    return all(s == 0 for d, s in enumerate(strides) if d != 1)


def _residual(graph: Graph, steps: list[Step], out: tuple[int, ...]) -> str | None:
    """The tensor of an Add right before the chain's ReLU when it has the output's shape:
    cudnnConvolutionBiasActivationForward adds it (as z) before the activation."""
    if len(steps) < 2 or not (isinstance(steps[1], Act) and steps[1].node.op == "Relu"):
        return None
    first = steps[0]
    if isinstance(first, Binary) and first.op == "Add" and not graph.is_weight(first.other) \
            and graph.type_of(first.other).shape == out:
        return first.other
    return None


def lower_conv(index: int, group: Group, graph: Graph,
               weights: Mapping[str, np.ndarray] | None) -> ConvCall:
    node = group.anchor
    assert node is not None and node.op == "Conv"
    x, w, y = (graph.type_of(t).shape for t in (node.inputs[0], node.inputs[1], node.outputs[0]))
    name = f"k{index}"
    steps = list(group.steps)
    own_bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
    bias: np.ndarray | None = None
    scale: StaticArray | None = None
    fused: list[str] = [f"bias '{own_bias}'"] if own_bias else []
    if steps and isinstance(steps[0], Affine):
        bn = steps[0].node
        steps.pop(0)
        factor, shift = bn_scale_shift(bn, weights)
        base = weight(weights, node, own_bias) if own_bias else np.zeros(w[0], np.float32)
        bias = base * factor + shift
        scale = StaticArray(f"{name}_scale", tuple(map(float, factor)),
                            f"{name}: {bn.op} '{bn.name}' folded: per-channel weight scale")
        fused.append(f"{bn.op} '{bn.name}' (folded)")
    first = steps[0] if steps else None
    if isinstance(first, Binary) and first.op == "Add" and _per_channel(graph, first.other, y):
        add = first
        steps.pop(0)
        if bias is None:
            bias = weight(weights, node, own_bias) if own_bias else np.zeros(w[0], np.float32)
        bias = bias + weight(weights, add.node, add.other).reshape(-1)
        fused.append(f"Add '{add.node.name}' (into the bias)")
    residual = _residual(graph, steps, y)
    if residual is not None:
        fused.append(f"Add '{steps[0].node.name}' (z)")
        steps.pop(0)
    relu = bool(steps) and isinstance(steps[0], Act) and steps[0].node.op == "Relu"
    if relu:
        steps.pop(0)
        fused.append("relu")
        if bias is None and own_bias is None:  # the fused call needs a bias: zeros
            bias = np.zeros(w[0], np.float32)
    bias_array = None
    if bias is not None:
        bias_array = StaticArray(f"{name}_bias", tuple(map(float, bias.astype(np.float32))),
                                 f"{name}: the bias cuDNN adds")
    epilogue = epilogue_for(f"{name}_epilogue", steps, y, graph, weights)
    return ConvCall(index, group, node.inputs[0], node.inputs[1], group.output, planar(x),
                    planar(w), planar(y), planar_window(node_window(node, graph)), x[1] // w[1],
                    scale, bias_array,
                    None if bias_array is not None else own_bias, relu, residual, tuple(fused),
                    epilogue)


def _pool_mode(node: Node) -> str:
    if "Max" in node.op:
        return "CUDNN_POOLING_MAX"
    if node.op == "AveragePool" and node.attr("count_include_pad", 0) == 1:
        return "CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING"
    return "CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING"


def lower_group(index: int, group: Group, graph: Graph,
                weights: Mapping[str, np.ndarray] | None) -> Call:
    node = group.anchor
    if node is None:
        shape = graph.type_of(group.output).shape
        epilogue = epilogue_for(f"k{index}_epilogue", group.steps, shape, graph, weights)
        assert epilogue is not None  # a group without an anchor has at least one step
        return StandaloneCall(index, group, group.source, group.output, epilogue)
    if node.op == "Conv":
        return lower_conv(index, group, graph, weights)
    x = node.inputs[0]
    if node.op in ("Softmax", "LogSoftmax"):
        algorithm = "CUDNN_SOFTMAX_LOG" if node.op == "LogSoftmax" else "CUDNN_SOFTMAX_ACCURATE"
        return SoftmaxCall(index, group, x, group.output, softmax_view(node, graph), algorithm)
    return PoolCall(index, group, x, group.output, planar(graph.type_of(x).shape),
                    planar(graph.type_of(node.outputs[0]).shape),
                    planar_window(node_window(node, graph)), _pool_mode(node))
