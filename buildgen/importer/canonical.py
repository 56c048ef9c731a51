"""Nodes rewritten at import into the one form the backends know, meaning the same.

* A Sum of two inputs is an Add (both broadcast numpy-style): exporters write either for a
  residual connection (the onnx zoo's ShuffleNet writes Sum), and backends fuse an Add into
  the Conv or GEMM before it (a residual sum post-op, an epilogue), so one form serves both.
* PRelu before opset 7 applies a slope of shape [C] per channel (axis 1, as Caffe2 and
  PyTorch's early exporter meant it); from opset 7 the slope broadcasts numpy-style, from
  the last axis. Models exported at opset 6 (onnx's own pytorch-converted tests among
  them) are imported with the slope reshaped to [C, 1, ..., 1], which means the same under
  both rules.
* A 2-D Conv over a width of 1 with a kernel of width 1 (a k x 1 convolution over an
  [N, C, H, 1] tensor, as jax2tf and Keras write a 1-D one) is a 1-D Conv over [N, C, H],
  between two Reshapes (which cost a view, or a copy of the activation at most). The bytes
  are the same; the speed is not: oneDNN runs magika's 5 x 1 convolution over
  [1, 256, 512, 1] in 14.3 ms as 2-D and 6.7 ms as 1-D, the c host in 10.4 and 6.6 ms
  (the same machine and run). Only a Conv whose output is only reshaped, sliced or moved, and
  with no Conv within two nodes before it, is rewritten: a Reshape would stop an
  activation, a BatchNormalization or a residual Add from fusing into it, and split a
  chain of Convs that a backend runs in its own layout.
* A Transpose that moves only dims of size 1 (the others keep their order) is a Reshape:
  the same bytes in the same order. Attention blocks with one head write one
  ([1, 256, 1, 16] -> [1, 1, 256, 16], 35 in SegFormer); as a Reshape it is a view, where a
  Transpose was a copy on the host, or a channel shuffle of group size 1 in oneDNN.
* An Identity is dropped, its readers reading its input (drop_identities, after folding):
  Paddle's exporter writes one after most ops (147 in PP-OCRv6's detector), and each ended
  a chain a backend fuses (a Conv and its bias Add, then the activation). One whose output
  is a graph output stays: the output keeps its name. So is a Dropout at inference whose
  mask nothing reads: SqueezeNet's, between its last fire module and its classifier, split
  the oneDNN region in two (the Concat before it wrote a plain layout with oneDNN's
  reference code, the Conv after it reordered it back).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np
import onnx

from buildgen.importer.node_index import NodeIndex
from buildgen.importer.shapes import TensorInfo
from buildgen.importer.subgraphs import every_node, subgraphs


def canonicalize(
    nodes: list[onnx.NodeProto], constants: MutableMapping[str, np.ndarray],
    inferred: MutableMapping[str, TensorInfo], opset: int,
) -> None:
    """Rewrite, in place, the nodes of `nodes` that have a canonical form."""
    for node in nodes:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Sum" and len(node.input) == 2 and all(node.input):
            node.op_type = "Add"
        elif node.op_type == "PRelu" and opset < 7 and len(node.input) == 2:
            _per_channel_slope(node, constants, inferred)
        elif node.op_type == "Transpose" and _moves_only_unit_dims(node, inferred):
            _as_reshape(node, constants, inferred)
    _one_d_convs(nodes, constants, inferred)


def drop_identities(nodes: Sequence[onnx.NodeProto], outputs: Sequence[str],
                    constants: Mapping[str, np.ndarray]) -> list[onnx.NodeProto]:
    """`nodes` without their Identity nodes, nor the Dropouts that are one (but those
    writing a graph output)."""
    source: dict[str, str] = {}  # an Identity's output -> the value it copies
    kept: list[onnx.NodeProto] = []
    # Names a subgraph (If, Loop, Scan) reads from the outer scope are not renamed there.
    stays = {*outputs, *_subgraph_reads(nodes)}
    read = {name for node in nodes for name in node.input} | stays
    for node in nodes:
        node.input[:] = [source.get(name, name) for name in node.input]
        if _is_identity(node, read, constants) and node.output[0] not in stays:
            source[node.output[0]] = node.input[0]
            continue
        kept.append(node)
    return kept


def _is_identity(node: onnx.NodeProto, read: set[str],
                 constants: Mapping[str, np.ndarray]) -> bool:
    """An Identity, or a Dropout at inference (no training_mode, or a constant false one)
    whose mask nothing reads: it passes its input through."""
    if node.domain not in ("", "ai.onnx"):
        return False
    if node.op_type == "Identity":
        return True
    if node.op_type != "Dropout" or any(name in read for name in node.output[1:] if name):
        return False
    training = node.input[2] if len(node.input) > 2 else ""
    return not training or (training in constants and not bool(constants[training].any()))


def _subgraph_reads(nodes: Sequence[onnx.NodeProto]) -> set[str]:
    return {name for node in nodes for graph in subgraphs(node)
            for inner in every_node(graph.node) for name in inner.input}


def _one_d_convs(nodes: list[onnx.NodeProto], constants: MutableMapping[str, np.ndarray],
                 inferred: MutableMapping[str, TensorInfo]) -> None:
    index = NodeIndex(nodes)
    rewritten: list[onnx.NodeProto] = []
    for node in nodes:
        if node.domain in ("", "ai.onnx") and node.op_type == "Conv" \
                and _width_one(node, constants, inferred) \
                and not _keeps_fusion(node, index):
            rewritten += _as_one_d(node, constants, inferred)
        else:
            rewritten.append(node)
    nodes[:] = rewritten


def _width_one(node: onnx.NodeProto, constants: Mapping[str, np.ndarray],
               inferred: Mapping[str, TensorInfo]) -> bool:
    x, y = inferred.get(node.input[0]), inferred.get(node.output[0])
    w = constants.get(node.input[1]) if len(node.input) > 1 else None
    if x is None or y is None or w is None or not (x.is_static and y.is_static):
        return False
    assert x.shape is not None and y.shape is not None
    if len(x.shape) != 4 or x.shape[3] != 1 or y.shape[3] != 1 or w.ndim != 4 or w.shape[3] != 1:
        return False
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    return (list(attrs.get("strides", [1, 1]))[1:] == [1] and pads[1] == pads[3] == 0
            and attrs.get("auto_pad", b"NOTSET") in (b"NOTSET", b"VALID", "NOTSET", "VALID"))


# What may read the Conv's output for the rewrite to cost nothing: nodes that only move,
# select or reshape it (magika's Conv feeds a Slice). An activation, a BatchNormalization or
# a residual Add after it fuses into the Conv, and a pool chains with it in a backend's
# layout: a Reshape between them would stop that.
_RESHAPING = frozenset({"Reshape", "Flatten", "Transpose", "Squeeze", "Slice", "Split",
                        "Gather", "Shape"})


def _keeps_fusion(node: onnx.NodeProto, index: NodeIndex) -> bool:
    """Whether the rewrite would split what a backend fuses or chains: a Conv within two
    nodes upstream, or a reader of its output that is not a reshape."""
    def up(name: str, depth: int) -> bool:
        found = index.producer.get(name)
        if found is None:
            return False
        return found.op_type == "Conv" or (depth > 1 and bool(found.input)
                                           and up(found.input[0], depth - 1))

    readers = index.readers.get(node.output[0], [])
    return up(node.input[0], 2) or any(r.op_type not in _RESHAPING for r in readers)


def _as_one_d(node: onnx.NodeProto, constants: MutableMapping[str, np.ndarray],
              inferred: MutableMapping[str, TensorInfo]) -> list[onnx.NodeProto]:
    """Reshape to [N, C, H], the Conv with the width dropped from its weights and
    attributes, Reshape back: the same values."""
    x, y = inferred[node.input[0]], inferred[node.output[0]]
    assert x.shape is not None and y.shape is not None
    base = node.name or node.output[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    weights = f"{node.input[1]}/1d"
    constants[weights] = constants[node.input[1]][..., 0]
    shapes = {}
    for side, shape in (("in", x.shape[:3]), ("out", y.shape)):
        shapes[side] = f"{base}/{side}_shape"
        constants[shapes[side]] = np.array(shape, np.int64)
    flat_in, flat_out = f"{base}/input_1d", f"{base}/output_1d"  # one pair per Conv
    inferred[flat_in] = TensorInfo(x.elem_type, x.shape[:3])
    inferred[flat_out] = TensorInfo(y.elem_type, y.shape[:3])
    one_d: dict[str, Any] = {"group": attrs.get("group", 1)}
    for key in ("kernel_shape", "strides", "dilations"):
        if key in attrs:
            one_d[key] = list(attrs[key])[:1]
    if "pads" in attrs:
        pads = list(attrs["pads"])
        one_d["pads"] = [pads[0], pads[2]]
    if "auto_pad" in attrs:
        one_d["auto_pad"] = attrs["auto_pad"]
    return [
        onnx.helper.make_node("Reshape", [node.input[0], shapes["in"]], [flat_in],
                              name=f"{base}/to_1d"),
        onnx.helper.make_node("Conv", [flat_in, weights, *node.input[2:]], [flat_out],
                              name=base, **one_d),
        onnx.helper.make_node("Reshape", [flat_out, shapes["out"]], [node.output[0]],
                              name=f"{base}/to_2d"),
    ]


def _per_channel_slope(
    node: onnx.NodeProto, constants: MutableMapping[str, np.ndarray],
    inferred: Mapping[str, TensorInfo],
) -> None:
    slope = constants.get(node.input[1])
    x = inferred.get(node.input[0])
    if slope is None or slope.ndim != 1 or slope.size == 1 or x is None or x.shape is None:
        return
    rank = len(x.shape)
    if rank < 3 or x.shape[1] != slope.size:
        return
    name = f"{node.input[1]}/per_channel"
    constants[name] = slope.reshape((slope.size,) + (1,) * (rank - 2))
    node.input[1] = name


def _moves_only_unit_dims(node: onnx.NodeProto, inferred: Mapping[str, TensorInfo]) -> bool:
    x = inferred.get(node.input[0])
    if x is None or not x.is_static or len(node.input) != 1:
        return False
    assert x.shape is not None
    rank = len(x.shape)
    perm = _perm(node, rank)
    if sorted(perm) != list(range(rank)) or 0 in x.shape:  # 0: Reshape would copy the dim
        return False
    moved = [d for d in perm if x.shape[d] != 1]
    return moved == sorted(moved)


def _perm(node: onnx.NodeProto, rank: int) -> list[int]:
    for attr in node.attribute:
        if attr.name == "perm":
            return [d + rank if d < 0 else d for d in attr.ints]
    return list(reversed(range(rank)))


def _as_reshape(node: onnx.NodeProto, constants: MutableMapping[str, np.ndarray],
                inferred: Mapping[str, TensorInfo]) -> None:
    x = inferred[node.input[0]]
    assert x.shape is not None
    out_shape = [x.shape[d] for d in _perm(node, len(x.shape))]
    shape = f"{node.output[0]}/shape"
    constants[shape] = np.array(out_shape, np.int64)
    node.op_type = "Reshape"
    del node.attribute[:]
    node.input.append(shape)
