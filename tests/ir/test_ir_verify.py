"""verify_graph accepts a sound graph and names each broken invariant precisely."""

from __future__ import annotations

from dataclasses import replace

import pytest
from ir_samples import f32, small_graph

from buildgen.ir import DType, Graph, Node, TensorType, Value, Weight
from buildgen.ir.verify import IRVerificationError, verify_graph


def _nodes(graph: Graph, **changes: Node) -> tuple[Node, ...]:
    return tuple(changes.get(n.name, n) for n in graph.nodes)


def test_sound_graph_passes() -> None:
    verify_graph(small_graph())


def test_zero_sized_dims_are_valid() -> None:
    """An empty tensor (a zero dim) is a value like any other, run-time or weight."""
    g = small_graph()
    verify_graph(replace(g, values=(g.values[0], Value("h", f32(2, 0)), *g.values[2:])))
    verify_graph(replace(g, weights=(replace(g.weights[0], type=f32(0, 4)), *g.weights[1:])))


def _broken() -> dict[str, tuple[Graph, str]]:
    g = small_graph()
    mm, add = g.node("mm"), g.node("add")
    return {
        "empty node name": (
            replace(g, nodes=_nodes(g, mm=replace(mm, name=""))),
            "node #0 (MatMul) has an empty name",
        ),
        "duplicate node name": (
            replace(g, nodes=_nodes(g, add=replace(add, name="mm"))),
            "node name 'mm' is used twice",
        ),
        "value and weight share a name": (
            replace(g, values=(*g.values, Value("w", f32(3, 4)))),
            "tensor name 'w' is declared twice",
        ),
        "use before definition": (
            replace(g, nodes=(g.nodes[1], g.nodes[0], *g.nodes[2:])),
            "node 'add' (Add) reads 'h' before it is defined",
        ),
        "unknown input": (
            replace(g, nodes=_nodes(g, add=replace(add, inputs=("h", "nope")))),
            "node 'add' (Add) reads 'nope' before it is defined",
        ),
        "output without value": (
            replace(g, values=tuple(v for v in g.values if v.name != "h")),
            "node 'mm' (MatMul) writes 'h', which has no declared value",
        ),
        "tensor written twice": (
            replace(g, nodes=_nodes(g, add=replace(add, outputs=("h",)))),
            "node 'add' (Add) writes 'h', which is already defined",
        ),
        "dynamic dim": (
            replace(
                g,
                values=(g.values[0], Value("h", TensorType(DType.FLOAT32, (2, -1))), *g.values[2:]),
            ),
            "tensor 'h' has shape (2, -1); every dim must be a static non-negative int",
        ),
        "misaligned weight": (
            replace(g, weights=(g.weights[0], replace(g.weights[1], offset=48), *g.weights[2:])),
            "weight 'b' is at offset 48, not a multiple of 64",
        ),
        "overlapping weights": (
            replace(g, weights=(g.weights[0], replace(g.weights[1], offset=0), *g.weights[2:])),
            "weight 'b' at offset 0 overlaps or precedes the previous weight, which ends at 48",
        ),
        "output never produced": (
            replace(
                g,
                outputs=(*g.outputs, Value("ghost", f32(1))),
                values=(*g.values, Value("ghost", f32(1))),
            ),
            "graph output 'ghost' is neither an input nor written by a node",
        ),
        "output type differs from its value": (
            replace(g, outputs=(Value("y", f32(2, 4)), g.outputs[1])),
            "graph output 'y' has type",
        ),
        "no outputs": (replace(g, outputs=()), "the graph has no outputs"),
        "unsorted attrs": (
            replace(g, nodes=_nodes(g, add=replace(add, attrs=(("b", 1), ("a", 2))))),
            "node 'add' (Add) has attributes ['b', 'a'], not sorted and unique",
        ),
        "bad opset": (replace(g, opset=0), "opset 0 is not a valid ONNX opset"),
    }


@pytest.mark.parametrize("case", sorted(_broken()))
def test_broken_invariant_is_named(case: str) -> None:
    graph, message = _broken()[case]
    with pytest.raises(IRVerificationError) as info:
        verify_graph(graph)
    text = str(info.value)
    assert text.startswith("internal error: graph 'small' fails verification:")
    assert message in text


def test_empty_weight_is_allowed_but_empty_value_is_not() -> None:
    g = small_graph()
    empty = Weight("empty", TensorType(DType.INT64, (0,)), 256)
    mm = g.node("mm")
    verify_graph(
        replace(
            g,
            weights=(*g.weights, empty),
            nodes=_nodes(g, mm=replace(mm, inputs=(*mm.inputs, "empty"))),
        )
    )


def test_many_problems_are_capped() -> None:
    g = small_graph()
    nodes = tuple(replace(n, name="") for n in g.nodes) * 4
    with pytest.raises(IRVerificationError, match=r"\.\.\. and \d+ more"):
        verify_graph(replace(g, nodes=nodes))
