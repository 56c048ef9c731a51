"""Small models for what the shared CPU-library cases lack on cuDNN."""

from __future__ import annotations

import onnx
from cpulib_cases import Builder


def one_d() -> onnx.ModelProto:
    """A strided, dilated 1-D Conv with bias and ReLU, a padded 1-D MaxPool, and a 3-D Conv
    (which cudnn declines)."""
    b = Builder("one_d")
    x = b.input("x", [2, 4, 20])
    y = b.node("Conv", [x, b.weight("w", [6, 4, 3]), b.weight("bias", [6])], "c",
               pads=[1, 1], strides=[2], dilations=[2])
    y = b.node("Relu", [y], "r")
    b.outputs.append(b.node("MaxPool", [y], "y", kernel_shape=[3], strides=[2], pads=[1, 1]))
    b.outputs.append(b.node("Conv", [b.input("v", [1, 2, 3, 4, 5]),
                                     b.weight("w3", [2, 2, 1, 1, 1])], "c3d"))
    return b.model()
