"""Graph IR dataclasses.

A Graph is what the importer produces and every later stage reads: tensors with static
shapes and dtypes, nodes in topological order carrying their ONNX attributes, and
weights described by (offset, size) into one raw weights file kept beside the graph.
Weight bytes are not part of the IR, so it stays small, hashable and cheap to load in
stages that do not need the numbers. A stage that judges nodes by their constant inputs
(partitioning: a backend declines a Resize for its scales) loads the small weights'
values beside the graph (buildgen/ir/constants.py: with_constants), and reads them
through Graph.constant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from math import prod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


class DType(str, Enum):
    FLOAT32 = "float32"
    INT64 = "int64"
    INT32 = "int32"
    BOOL = "bool"

    @property
    def itemsize(self) -> int:
        return {"float32": 4, "int64": 8, "int32": 4, "bool": 1}[self.value]

    @property
    def c_type(self) -> str:
        return {"float32": "float", "int64": "int64_t", "int32": "int32_t", "bool": "uint8_t"}[
            self.value
        ]


@dataclass(frozen=True)
class TensorType:
    dtype: DType
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Value:
    """A named tensor of the graph (graph input, intermediate or output)."""

    name: str
    type: TensorType


@dataclass(frozen=True)
class Weight:
    """A constant tensor whose bytes live in the weights file at [offset, offset + nbytes).

    Offsets are 64-byte aligned so generated code may use aligned loads.
    """

    name: str
    type: TensorType
    offset: int


# ONNX attribute values after import. Tensor-valued attributes (Constant's value) become
# weights during import, so they never appear here. Tuples, not lists: the IR is frozen.
AttrValue = int | float | str | tuple[int, ...] | tuple[float, ...] | tuple[str, ...]


@dataclass(frozen=True)
class Node:
    name: str  # unique within the graph; the ONNX node name, or a made-up one if absent
    op: str  # ONNX op_type, e.g. "MatMul"
    inputs: tuple[str, ...]  # value/weight names; "" marks an omitted optional input
    outputs: tuple[str, ...]
    attrs: tuple[tuple[str, AttrValue], ...] = ()  # sorted by name
    domain: str = ""  # "" is the default ONNX domain

    def attr(self, name: str, default: AttrValue | None = None) -> AttrValue | None:
        for key, value in self.attrs:
            if key == name:
                return value
        return default

    def has_attr(self, name: str) -> bool:
        return any(key == name for key, _ in self.attrs)


@dataclass(frozen=True)
class Graph:
    name: str
    inputs: tuple[Value, ...]  # run-time inputs, in the model's order
    outputs: tuple[Value, ...]  # in the model's order
    nodes: tuple[Node, ...]  # topologically sorted
    values: tuple[Value, ...]  # every non-weight tensor: inputs, intermediates, outputs
    weights: tuple[Weight, ...]
    opset: int
    source: str = ""  # the ONNX file it came from, for messages and generated comments
    # The small weights' values (constants.bin) when a stage loaded them; neither part of
    # the graph's identity nor of graph.json.
    constant_values: Mapping[str, np.ndarray] | None = field(
        default=None, compare=False, repr=False
    )

    @cached_property
    def _types(self) -> dict[str, TensorType]:
        types = {v.name: v.type for v in self.values}
        types.update({w.name: w.type for w in self.weights})
        return types

    @cached_property
    def _weights_by_name(self) -> dict[str, Weight]:
        return {w.name: w for w in self.weights}

    @cached_property
    def _producers(self) -> dict[str, Node]:
        return {out: node for node in self.nodes for out in node.outputs if out}

    @cached_property
    def _consumers(self) -> dict[str, tuple[Node, ...]]:
        consumers: dict[str, list[Node]] = {}
        for node in self.nodes:
            for name in node.inputs:
                if name:
                    consumers.setdefault(name, []).append(node)
        return {k: tuple(v) for k, v in consumers.items()}

    @cached_property
    def _nodes_by_name(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    def type_of(self, name: str) -> TensorType:
        return self._types[name]

    def is_weight(self, name: str) -> bool:
        return name in self._weights_by_name

    def weight(self, name: str) -> Weight:
        return self._weights_by_name[name]

    def constant(self, name: str) -> np.ndarray | None:
        """The value of weight `name` when the graph carries its constants and it is one of
        them (a small weight); else None, and a caller judges the node without it."""
        if self.constant_values is None:
            return None
        return self.constant_values.get(name)

    def producer(self, name: str) -> Node | None:
        return self._producers.get(name)

    def consumers(self, name: str) -> tuple[Node, ...]:
        return self._consumers.get(name, ())

    def node(self, name: str) -> Node:
        return self._nodes_by_name[name]

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.outputs)
