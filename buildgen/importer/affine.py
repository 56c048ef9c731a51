"""A per-channel Mul and Add after an inference BatchNormalization, folded into its scale
and shift.

Caffe2's exports (the onnx zoo's Inception-v2: `bn/sc_w`, `bn/sc_b`), and graphs converted
from frameworks with an "affine channel" layer, write a BatchNormalization followed by a
Mul and an Add of per-channel constants. As three ops, a backend fuses the Conv with its
BatchNormalization, and the Relu after the Add with nothing: Inception-v2 ran 69 extra
elementwise passes over its activations between convolutions (on the c host, those of its
7x7 stage on one thread: too small to share). Folded, the Conv, the BatchNormalization and
the Relu are one kernel again. onnxruntime folds the same chains when it loads a model.

    BN(x) * c + d = (scale * c) * (x - mean) / sqrt(var + eps) + (B * c + d)

so the chain is one BatchNormalization with scale' = scale * c and B' = B * c + d (in
float32; the result equals the chain's to a rounding). Only constants that are the same
for every position of a channel fold (shape [C, 1, ..., 1], [1, C, 1, ...], a scalar), and
only where the BatchNormalization's result, and each folded op's but the last, is read by
the next op alone: the last op's output keeps its name.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence

import numpy as np
import onnx

from buildgen.importer.node_index import NodeIndex
from buildgen.importer.shapes import TensorInfo


def fold_affine(nodes: Sequence[onnx.NodeProto], constants: MutableMapping[str, np.ndarray],
                inferred: Mapping[str, TensorInfo],
                outputs: Sequence[str]) -> list[onnx.NodeProto]:
    """`nodes` with each BatchNormalization's following per-channel Mul/Add folded into it
    (new constants join `constants`; the old ones are dropped later if nothing reads them)."""
    index = NodeIndex(nodes, outputs)
    taken = {*constants, *(name for n in nodes for name in (*n.input, *n.output))}
    gone: set[int] = set()  # id() of folded nodes
    replaced: dict[int, onnx.NodeProto] = {}
    for node in nodes:
        if not _is_inference_batchnorm(node, constants):
            continue
        channels = _channels(node, constants, inferred)
        if channels is None:
            continue
        scale, shift = constants[node.input[1]], constants[node.input[2]]
        produced, folded = node.output[0], []
        while (step := _affine_step(index.only_reader(produced), produced, constants,
                                    channels)) is not None:
            op, follower, vector = step
            if op == "Mul":
                scale, shift = scale * vector, shift * vector
            else:
                shift = shift + vector
            folded.append(follower)
            produced = follower.output[0]
        if not folded:
            continue
        gone.update(id(n) for n in folded)
        replaced[id(node)] = _batchnorm(node, produced, constants, taken,
                                        scale.astype(np.float32), shift.astype(np.float32))
    return [replaced.get(id(n), n) for n in nodes if id(n) not in gone]


def _is_inference_batchnorm(node: onnx.NodeProto,
                            constants: Mapping[str, np.ndarray]) -> bool:
    if node.op_type != "BatchNormalization" or node.domain not in ("", "ai.onnx"):
        return False
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return (len(node.output) == 1 and not attrs.get("training_mode", 0)
            and len(node.input) == 5
            and all(constants.get(name) is not None
                    and constants[name].dtype == np.float32 for name in node.input[1:]))


def _channels(node: onnx.NodeProto, constants: Mapping[str, np.ndarray],
              inferred: Mapping[str, TensorInfo]) -> tuple[int, int] | None:
    """(C, rank) of the BatchNormalization's input, when known and its scale is [C]."""
    info = inferred.get(node.input[0])
    if info is None or info.shape is None or len(info.shape) < 2:
        return None
    channels = info.shape[1]
    if channels is None or constants[node.input[1]].shape != (channels,):
        return None
    return channels, len(info.shape)


def _affine_step(
    follower: onnx.NodeProto | None, produced: str, constants: Mapping[str, np.ndarray],
    channels: tuple[int, int],
) -> tuple[str, onnx.NodeProto, np.ndarray] | None:
    """(op, node, per-channel vector [C]) if `follower` multiplies or adds `produced` by a
    per-channel constant."""
    if follower is None or follower.op_type not in ("Mul", "Add") \
            or follower.domain not in ("", "ai.onnx") or len(follower.input) != 2:
        return None
    other = [name for name in follower.input if name != produced]
    if len(other) != 1:  # x * x
        return None
    vector = _per_channel(constants.get(other[0]), *channels)
    return None if vector is None else (follower.op_type, follower, vector)


def _per_channel(value: np.ndarray | None, channels: int, rank: int) -> np.ndarray | None:
    """`value` as a [C] vector if it broadcasts against [N, C, ...] to the same value at
    every position of a channel (and changes no shape), else None."""
    if value is None or value.dtype != np.float32 or value.ndim > rank:
        return None
    shape = (1,) * (rank - value.ndim) + value.shape
    if any(extent != 1 for axis, extent in enumerate(shape) if axis != 1) \
            or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(value.reshape(-1), (channels,))


def _batchnorm(node: onnx.NodeProto, output: str, constants: MutableMapping[str, np.ndarray],
               taken: set[str], scale: np.ndarray, shift: np.ndarray) -> onnx.NodeProto:
    """A copy of BatchNormalization `node` with the folded scale and shift, writing `output`."""
    folded = onnx.NodeProto()
    folded.CopyFrom(node)
    folded.input[1] = _new_constant(f"{node.input[1]}/folded", scale, constants, taken)
    folded.input[2] = _new_constant(f"{node.input[2]}/folded", shift, constants, taken)
    folded.output[0] = output
    return folded


def _new_constant(name: str, value: np.ndarray, constants: MutableMapping[str, np.ndarray],
                  taken: set[str]) -> str:
    """`value` as a constant named `name` (with a number after it if that is taken)."""
    unique, n = name, 1
    while unique in taken:
        n += 1
        unique = f"{name}{n}"
    taken.add(unique)
    constants[unique] = value
    return unique
