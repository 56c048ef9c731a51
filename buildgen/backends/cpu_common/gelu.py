"""The erf form of GELU as exporters write it, recognized as one elementwise step:

    y = Mul(Mul(x, Add(Erf(Div(x, sqrt(2))), 1)), 0.5)

(either operand order of each Mul and Add, and Mul by 1/sqrt(2) for the Div: what torch's
exporter writes for F.gelu). It is not a chain, since x feeds both the Div and a Mul, so a
pattern table cannot declare it; `gelu_at` finds the match any of its five nodes belongs to.
A backend with a GELU kernel (oneDNN's gelu_erf) runs the five nodes as one step, fused
after the MatMul or Gemm that computes x when x has no other reader.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from buildgen.ir import DType, Graph, Node

_TOLERANCE = 1e-4


@dataclass(frozen=True)
class GeluMatch:
    source: str  # x
    nodes: tuple[Node, ...]  # the five nodes, in graph order
    output: str


def _const(graph: Graph, values: Mapping[str, float] | None, name: str) -> float | None:
    """A scalar constant's value: from `values` when given, else from the graph's constants;
    NaN ('some constant') when neither has it (a graph loaded without its constants)."""
    if not graph.is_weight(name) or graph.type_of(name).numel != 1:
        return None
    if values is not None:
        return values.get(name, math.nan)
    carried = graph.constant(name)
    return math.nan if carried is None else float(carried.reshape(-1)[0])


def _close(value: float | None, expected: float) -> bool:
    return value is not None and (math.isnan(value) or abs(value - expected) < _TOLERANCE)


def _only_reader(graph: Graph, tensor: str) -> Node | None:
    readers = graph.consumers(tensor)
    if len(readers) != 1 or tensor in graph.output_names:
        return None
    return readers[0]


def _other(node: Node, tensor: str) -> str | None:
    if len(node.inputs) != 2 or node.inputs.count(tensor) != 1:
        return None
    return node.inputs[1 - node.inputs.index(tensor)]


def _match_from(graph: Graph, scale: Node, values: Mapping[str, float] | None
                ) -> GeluMatch | None:
    """The match whose x / sqrt(2) node is `scale` (a Div by sqrt(2) or Mul by its inverse)."""
    if scale.op == "Div" and len(scale.inputs) == 2:
        x, factor, wanted = scale.inputs[0], scale.inputs[1], math.sqrt(2.0)
    elif scale.op == "Mul" and len(scale.inputs) == 2:
        x = next((t for t in scale.inputs if not graph.is_weight(t)), "")
        factor, wanted = _other(scale, x) or "", 1.0 / math.sqrt(2.0)
    else:
        return None
    if not x or graph.is_weight(x) or graph.type_of(x).dtype != DType.FLOAT32:
        return None
    if not _close(_const(graph, values, factor), wanted):
        return None
    erf = _only_reader(graph, scale.outputs[0])
    if erf is None or erf.op != "Erf":
        return None
    add = _only_reader(graph, erf.outputs[0])
    if add is None or add.op != "Add" or not _close(
            _const(graph, values, _other(add, erf.outputs[0]) or ""), 1.0):
        return None
    times_x = _only_reader(graph, add.outputs[0])
    if times_x is None or times_x.op != "Mul" or _other(times_x, add.outputs[0]) != x:
        return None
    half = _only_reader(graph, times_x.outputs[0])
    if half is None or half.op != "Mul" or not _close(
            _const(graph, values, _other(half, times_x.outputs[0]) or ""), 0.5):
        return None
    return GeluMatch(x, (scale, erf, add, times_x, half), half.outputs[0])


def gelu_at(graph: Graph, node: Node, values: Mapping[str, float] | None = None
            ) -> GeluMatch | None:
    """The GELU subgraph `node` belongs to, if any. `values` (weight name -> scalar) checks
    the constants' values; without it, the graph's constants do (decline_reason), or, when
    the graph carries none, any scalar constant is taken and codegen checks the values."""
    # The x / sqrt(2) node is at most four producers back from any node of the match.
    frontier, seen = [node], set()
    for _ in range(5):
        found = []
        for current in frontier:
            if current.name in seen or current.op not in ("Div", "Mul", "Erf", "Add"):
                continue
            seen.add(current.name)
            match = _match_from(graph, current, values)
            if match is not None and node in match.nodes:
                return match
            found += [graph.producer(t) for t in current.inputs if t and not graph.is_weight(t)]
        frontier = [n for n in found if n is not None]
    return None
