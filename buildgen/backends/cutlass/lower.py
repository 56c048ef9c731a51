"""A cutlass region's nodes -> the CUTLASS calls that compute them.

A region (merged from pattern matches) is a sequence of anchors, each with the steps
fused into its epilogue:
    Gemm   [Relu | GELU]                       alpha, beta and C (a bias row or a full C)
    MatMul [Add(bias row)] [Relu | GELU]       batched when both operands carry the batch
    Conv   [BatchNormalization] [Relu | GELU]  2-D, one group; BN folded at create
and standalone GELUs (an exporter's five-node erf form) whose input no anchor of the region
computes, run by a small elementwise kernel of the module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from buildgen.backends.cpu_common.gelu import gelu_at
from buildgen.errors import error
from buildgen.ir import Graph, Node

ACTIVATIONS = {"Relu": "relu"}


@dataclass(frozen=True)
class GemmCall:
    nodes: tuple[str, ...]
    a: str
    b: str
    c: str | None  # bias or C tensor
    c_full: bool  # C is m x n (ldc = n) rather than one bias row (ldc = 0)
    output: str
    m: int
    n: int
    k: int
    batch: int  # > 1: both operands carry `batch` matrices
    trans_a: bool
    trans_b: bool
    alpha: float
    beta: float
    epilogue: str  # "linear" | "relu" | "gelu"


@dataclass(frozen=True)
class ConvCall:
    nodes: tuple[str, ...]
    x: str
    w: str
    bias: str | None
    bn: tuple[str, str, str, str] | None  # scale, B, mean, var weights
    epsilon: float
    output: str
    n: int
    c: int
    h: int
    w_in: int
    k: int
    r: int
    s: int
    p: int
    q: int
    pads: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]
    epilogue: str


@dataclass(frozen=True)
class GeluCall:
    nodes: tuple[str, ...]
    x: str
    output: str
    count: int


Call = GemmCall | ConvCall | GeluCall


def _ints(node: Node, name: str, default: tuple[int, ...]) -> tuple[int, ...]:
    value = node.attr(name, default)
    assert isinstance(value, tuple)
    return tuple(int(v) for v in value)


def _float_attr(node: Node, name: str, default: float) -> float:
    value = node.attr(name, default)
    assert isinstance(value, (int, float))
    return float(value)


def _only_reader(graph: Graph, tensor: str, region: set[str]) -> Node | None:
    readers = graph.consumers(tensor)
    if len(readers) != 1 or tensor in graph.output_names or readers[0].name not in region:
        return None
    return readers[0]


def _epilogue(graph: Graph, out: str, region: set[str], values: Mapping[str, float] | None
              ) -> tuple[str, tuple[str, ...], str]:
    """(epilogue, nodes it covers, final tensor) for the activation after `out`."""
    reader = _only_reader(graph, out, region)
    if reader is not None and reader.op in ACTIVATIONS:
        return ACTIVATIONS[reader.op], (reader.name,), reader.outputs[0]
    readers = graph.consumers(out)
    if readers and out not in graph.output_names and all(r.name in region for r in readers):
        match = gelu_at(graph, readers[0], values)
        if match is not None and match.source == out and {n.name for n in match.nodes} >= {
                r.name for r in readers}:
            return "gelu", tuple(n.name for n in match.nodes), match.output
    return "linear", (), out


def _bias_row(graph: Graph, node: Node, out: str, n: int) -> str | None:
    """The weight an Add adds to `out` when it is one row of n values."""
    other = [t for t in node.inputs if t != out]
    if node.op != "Add" or len(other) != 1 or not graph.is_weight(other[0]):
        return None
    shape = graph.type_of(other[0]).shape
    return other[0] if shape[-1:] == (n,) and math.prod(shape) == n else None


def _matmul(graph: Graph, node: Node, region: set[str], values: Mapping[str, float] | None
            ) -> GemmCall:
    a, b = node.inputs[0], node.inputs[1]
    sa, sb = graph.type_of(a).shape, graph.type_of(b).shape
    m, k, n = sa[-2], sa[-1], sb[-1]
    batch_a, batch_b = math.prod(sa[:-2]), math.prod(sb[:-2])
    if len(sb) == 2:  # one weight matrix for every batch: rows of A stack into one GEMM
        m, batch = m * batch_a, 1
    elif sa[:-2] == sb[:-2]:
        batch = batch_a
    else:
        raise error(f"cutlass: MatMul {node.name!r}: broadcast batches {sa} x {sb}")
    assert batch_b in (1, batch)
    out, nodes, bias = node.outputs[0], [node.name], None
    reader = _only_reader(graph, out, region)
    if reader is not None and batch == 1 and _bias_row(graph, reader, out, n):
        bias = _bias_row(graph, reader, out, n)
        nodes.append(reader.name)
        out = reader.outputs[0]
    epilogue, more, out = _epilogue(graph, out, region, values)
    return GemmCall(tuple(nodes) + more, a, b, bias, False, out, m, n, k, batch, False, False,
                    1.0, 1.0 if bias else 0.0, epilogue)


def _gemm(graph: Graph, node: Node, region: set[str], values: Mapping[str, float] | None
          ) -> GemmCall:
    a, b = node.inputs[0], node.inputs[1]
    c = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
    trans_a, trans_b = bool(node.attr("transA", 0)), bool(node.attr("transB", 0))
    sa, sb = graph.type_of(a).shape, graph.type_of(b).shape
    m, k = (sa[1], sa[0]) if trans_a else sa
    n = sb[0] if trans_b else sb[1]
    c_full = False
    if c is not None:
        shape = graph.type_of(c).shape
        c_full = tuple(shape) == (m, n) and m > 1
        if not c_full and (shape[-1:] != (n,) or math.prod(shape) != n):
            raise error(f"cutlass: Gemm {node.name!r}: C of shape {shape} is neither "
                        f"[{n}] nor [{m}, {n}]")
    alpha, beta = _float_attr(node, "alpha", 1.0), _float_attr(node, "beta", 1.0)
    epilogue, more, out = _epilogue(graph, node.outputs[0], region, values)
    return GemmCall((node.name, *more), a, b, c, c_full, out, m, n, k, 1, trans_a, trans_b,
                    alpha, beta if c else 0.0, epilogue)


def _conv(graph: Graph, node: Node, region: set[str], values: Mapping[str, float] | None
          ) -> ConvCall:
    x, w = node.inputs[0], node.inputs[1]
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
    n, c, h, wi = graph.type_of(x).shape
    k, _, r, s = graph.type_of(w).shape
    out = node.outputs[0]
    _, _, p, q = graph.type_of(out).shape
    pads = _ints(node, "pads", (0, 0, 0, 0))
    nodes, bn, eps = [node.name], None, 1e-5
    reader = _only_reader(graph, out, region)
    if reader is not None and reader.op == "BatchNormalization":
        bn = (reader.inputs[1], reader.inputs[2], reader.inputs[3], reader.inputs[4])
        eps = _float_attr(reader, "epsilon", 1e-5)
        nodes.append(reader.name)
        out = reader.outputs[0]
    epilogue, more, out = _epilogue(graph, out, region, values)
    strides, dilations = _ints(node, "strides", (1, 1)), _ints(node, "dilations", (1, 1))
    return ConvCall(tuple(nodes) + more, x, w, bias, bn, eps, out, n, c, h, wi, k, r, s, p, q,
                    (pads[0], pads[1]), (strides[0], strides[1]),
                    (dilations[0], dilations[1]), epilogue)


def lower_region(graph: Graph, nodes: tuple[str, ...],
                 values: Mapping[str, float] | None = None) -> tuple[Call, ...]:
    """The calls computing a region's nodes, in order; every node is covered once."""
    region = set(nodes)
    calls: list[Call] = []
    done: set[str] = set()
    for name in nodes:
        if name in done:
            continue
        node = graph.node(name)
        call: Call
        if node.op == "MatMul":
            call = _matmul(graph, node, region, values)
        elif node.op == "Gemm":
            call = _gemm(graph, node, region, values)
        elif node.op == "Conv":
            call = _conv(graph, node, region, values)
        elif (match := gelu_at(graph, node, values)) is not None:
            count = graph.type_of(match.source).numel
            call = GeluCall(tuple(n.name for n in match.nodes), match.source, match.output,
                            count)
        else:
            raise error(f"cutlass: cannot generate code for node {name!r} ({node.op})",
                        hint="the partition gave this node to cutlass; pin it elsewhere")
        calls.append(call)
        done.update(call.nodes)
    missing = [n for n in nodes if n not in done]
    if missing:
        raise error(f"cutlass: nodes {missing} were not covered by a CUTLASS call")
    return tuple(calls)
