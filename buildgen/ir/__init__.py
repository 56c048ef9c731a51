"""The graph IR: frozen dataclasses with static shapes, serialized deterministically."""

from buildgen.ir.graph import (
    AttrValue,
    DType,
    Graph,
    Node,
    TensorType,
    Value,
    Weight,
)

__all__ = ["AttrValue", "DType", "Graph", "Node", "TensorType", "Value", "Weight"]
