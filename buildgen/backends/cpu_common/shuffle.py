"""A channel shuffle as exporters write it (ShuffleNet's, after a grouped 1x1 Conv):

    Reshape  x[N, C, *S] -> [N, g, C/g, *S]
    Transpose perm [0, 2, 1, 3, ...]
    Reshape  -> [N, C, *S]

Three nodes that no pattern of elementwise steps can declare; `shuffle_at` finds the match
any of them belongs to. A backend with a shuffle primitive (oneDNN's) runs them as one
group of their own, in the layout of their input: left to the host, each shuffle split
the convolutions around it into two regions, a reorder out of the blocked layout and back
at each boundary (ShuffleNet: 16 of them).
"""

from __future__ import annotations

from dataclasses import dataclass

from buildgen.ir import DType, Graph, Node


@dataclass(frozen=True)
class ShuffleMatch:
    source: str  # x
    nodes: tuple[Node, ...]  # the Reshape, the Transpose, the Reshape
    output: str
    groups: int  # g: the channels are read as [g][C/g] and written as [C/g][g]


def _only_reader(graph: Graph, tensor: str, op: str) -> Node | None:
    readers = graph.consumers(tensor)
    if len(readers) != 1 or tensor in graph.output_names or readers[0].op != op:
        return None
    return readers[0]


def _match_from(graph: Graph, first: Node) -> ShuffleMatch | None:
    """The match whose first Reshape is `first`."""
    if first.op != "Reshape" or not first.inputs or graph.is_weight(first.inputs[0]):
        return None
    x = first.inputs[0]
    x_type = graph.type_of(x)
    shape, split = x_type.shape, graph.type_of(first.outputs[0]).shape
    if x_type.dtype != DType.FLOAT32 or len(shape) < 3 or len(split) != len(shape) + 1:
        return None
    if split[0] != shape[0] or split[3:] != shape[2:] or split[1] * split[2] != shape[1]:
        return None
    transpose = _only_reader(graph, first.outputs[0], "Transpose")
    if transpose is None or transpose.attr("perm") != (0, 2, 1, *range(3, len(split))):
        return None
    last = _only_reader(graph, transpose.outputs[0], "Reshape")
    if last is None or graph.type_of(last.outputs[0]).shape != shape:
        return None
    return ShuffleMatch(x, (first, transpose, last), last.outputs[0], split[1])


def shuffle_at(graph: Graph, node: Node) -> ShuffleMatch | None:
    """The channel shuffle `node` (one of its Reshapes or its Transpose) belongs to, if any."""
    first: Node | None = node
    for _ in range(2):  # walk back to the first Reshape
        match = _match_from(graph, first) if first is not None else None
        if match is not None and any(n.name == node.name for n in match.nodes):
            return match
        source = first.inputs[0] if first is not None and first.inputs else ""
        first = graph.producer(source) if source else None
    match = _match_from(graph, first) if first is not None else None
    return match if match is not None and any(n.name == node.name for n in match.nodes) else None
