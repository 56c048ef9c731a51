"""SiLU (Swish with beta 1) as exporters write it, recognized as one elementwise step:

    y = Mul(x, Sigmoid(x))      (either operand order)

Like the erf GELU (gelu.py) it is not a chain, since x feeds both the Sigmoid and the Mul,
so a pattern table cannot declare it; `swish_at` finds the match either node belongs to. A
backend with a swish kernel (oneDNN's eltwise_swish) runs the two nodes as one step, fused
after the Conv, MatMul or Gemm that computes x when x has no other reader. YOLOv8 and
EfficientNet end nearly every convolution in one: as two host ops they split the oneDNN
regions around each convolution, every boundary a reorder out of and back into oneDNN's
blocked layout (YOLOv8n: 52 oneDNN regions, 52 host regions between them).
"""

from __future__ import annotations

from dataclasses import dataclass

from buildgen.ir import DType, Graph, Node


@dataclass(frozen=True)
class SwishMatch:
    source: str  # x
    nodes: tuple[Node, ...]  # the Sigmoid, then the Mul
    output: str


def _match_from(graph: Graph, sigmoid: Node) -> SwishMatch | None:
    """The match whose Sigmoid is `sigmoid`."""
    if sigmoid.op != "Sigmoid" or len(sigmoid.inputs) != 1:
        return None
    x, s = sigmoid.inputs[0], sigmoid.outputs[0]
    if graph.is_weight(x) or graph.type_of(x).dtype != DType.FLOAT32:
        return None
    readers = graph.consumers(s)
    if len(readers) != 1 or s in graph.output_names:
        return None
    mul = readers[0]
    if mul.op != "Mul" or sorted(mul.inputs) != sorted((x, s)) or x == s:
        return None
    if graph.type_of(mul.outputs[0]).shape != graph.type_of(x).shape:
        return None
    return SwishMatch(x, (sigmoid, mul), mul.outputs[0])


def swish_at(graph: Graph, node: Node) -> SwishMatch | None:
    """The SiLU subgraph `node` (its Sigmoid or its Mul) belongs to, if any."""
    if node.op == "Sigmoid":
        return _match_from(graph, node)
    if node.op != "Mul" or len(node.inputs) != 2:
        return None
    for name in node.inputs:
        producer = graph.producer(name) if name else None
        if producer is not None and producer.op == "Sigmoid":
            match = _match_from(graph, producer)
            if match is not None and match.nodes[1].name == node.name:
                return match
    return None
