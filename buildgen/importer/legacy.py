"""Ops whose meaning changed between opsets, rewritten at import into their current form.

PRelu before opset 7 applies a slope of shape [C] per channel (axis 1, as Caffe2 and
PyTorch's early exporter meant it); from opset 7 the slope broadcasts numpy-style, from the
last axis. Models exported at opset 6 (onnx's own pytorch-converted tests among them) are
imported with the slope reshaped to [C, 1, ..., 1], which means the same under both rules.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence

import numpy as np
import onnx

from buildgen.importer.shapes import TensorInfo


def modernize(
    nodes: Sequence[onnx.NodeProto], constants: MutableMapping[str, np.ndarray],
    inferred: Mapping[str, TensorInfo], opset: int,
) -> None:
    """Rewrite, in place, the nodes of `nodes` whose opset meaning is an old one."""
    if opset >= 7:
        return
    for node in nodes:
        if node.op_type == "PRelu" and len(node.input) == 2:
            _per_channel_slope(node, constants, inferred)


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
