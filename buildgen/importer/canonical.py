"""Nodes rewritten at import into the one form the backends know, meaning the same.

* A Sum of two inputs is an Add (both broadcast numpy-style): exporters write either for a
  residual connection (the onnx zoo's ShuffleNet writes Sum), and backends fuse an Add into
  the Conv or GEMM before it (a residual sum post-op, an epilogue), so one form serves both.
* PRelu before opset 7 applies a slope of shape [C] per channel (axis 1, as Caffe2 and
  PyTorch's early exporter meant it); from opset 7 the slope broadcasts numpy-style, from
  the last axis. Models exported at opset 6 (onnx's own pytorch-converted tests among
  them) are imported with the slope reshaped to [C, 1, ..., 1], which means the same under
  both rules.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence

import numpy as np
import onnx

from buildgen.importer.shapes import TensorInfo


def canonicalize(
    nodes: Sequence[onnx.NodeProto], constants: MutableMapping[str, np.ndarray],
    inferred: Mapping[str, TensorInfo], opset: int,
) -> None:
    """Rewrite, in place, the nodes of `nodes` that have a canonical form."""
    for node in nodes:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Sum" and len(node.input) == 2 and all(node.input):
            node.op_type = "Add"
        elif node.op_type == "PRelu" and opset < 7 and len(node.input) == 2:
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
