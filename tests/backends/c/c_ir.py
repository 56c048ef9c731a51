"""Hand-built graph IR for tests that need no ONNX file (decline reasons, planning)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from buildgen.ir import DType, Graph, Node, TensorType, Value, Weight
from buildgen.partition.model import Partition, Region

F32, I64 = DType.FLOAT32, DType.INT64


def ir_node(
    op: str, inputs: Sequence[str], outputs: Sequence[str], domain: str = "", **attrs: object
) -> Node:
    converted = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()))
    return Node(f"{op}_{outputs[0]}", op, tuple(inputs), tuple(outputs), converted, domain)  # type: ignore[arg-type]


def ir_graph(
    nodes: Sequence[Node],
    types: Mapping[str, tuple[DType, tuple[int, ...]]],
    inputs: Sequence[str],
    outputs: Sequence[str],
    weights: Sequence[str] = (),
    opset: int = 17,
) -> Graph:
    """Weights get 64-byte aligned offsets in the order given."""
    tensor = {n: TensorType(d, s) for n, (d, s) in types.items()}
    placed, offset = [], 0
    for name in weights:
        placed.append(Weight(name, tensor[name], offset))
        offset += (tensor[name].nbytes + 63) // 64 * 64
    values = tuple(Value(n, t) for n, t in tensor.items() if n not in weights)
    by_name = {v.name: v for v in values}
    return Graph(
        "g",
        tuple(by_name[n] for n in inputs),
        tuple(by_name[n] for n in outputs),
        tuple(nodes),
        values,
        tuple(placed),
        opset,
    )


def one_region(graph: Graph, target: str = "c") -> Partition:
    return Partition("m", "cpu", "", (Region("r0", target, tuple(n.name for n in graph.nodes)),))
