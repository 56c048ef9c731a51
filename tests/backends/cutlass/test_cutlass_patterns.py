"""Which nodes of the example models the cutlass patterns take, and what they decline."""

from __future__ import annotations

import dataclasses

from cutlass_cases import model, partition

from buildgen.backends.cutlass.patterns import decline_reason
from buildgen.ir import Node


def _cutlass_nodes(name: str) -> dict[str, str]:
    """node -> the patterns of its region, for the nodes given to cutlass."""
    return {n: r.pattern for r in partition(name).regions if r.target == "cutlass"
            for n in r.nodes}


def test_mlp_every_gemm_with_relu_and_gelu_epilogues() -> None:
    taken = _cutlass_nodes("mlp")
    graph = model("mlp").graph
    assert {n.name for n in graph.nodes if n.op == "Gemm"} <= set(taken)
    assert "/Relu" in taken and {"/Div", "/Erf", "/Add", "/Mul", "/Mul_1"} <= set(taken)
    assert "cutlass.gemm" in taken["/fc1/Gemm"] and "cutlass.gelu" in taken["/Erf"]


def test_cnn_convolutions_with_batchnorm_and_relu_but_not_pools() -> None:
    taken = _cutlass_nodes("cnn")
    graph = model("cnn").graph
    for op in ("Conv", "BatchNormalization", "Relu", "Gemm"):
        assert {n.name for n in graph.nodes if n.op == op} <= set(taken), op
    for op in ("MaxPool", "GlobalAveragePool", "Add", "Flatten"):
        assert not {n.name for n in graph.nodes if n.op == op} & set(taken), op
    assert taken["/stem/conv/Conv"] == "cutlass.conv2d"


def test_encoder_every_matmul_and_bias_but_not_softmax_or_layernorm() -> None:
    taken = _cutlass_nodes("encoder")
    graph = model("encoder").graph
    assert {n.name for n in graph.nodes if n.op == "MatMul"} <= set(taken)
    assert {"/q/Add", "/ff1/Add", "/ff2/Add"} <= set(taken)
    for op in ("Softmax", "LayerNormalization", "Transpose", "Reshape"):
        assert not {n.name for n in graph.nodes if n.op == op} & set(taken), op


def _with(node: Node, name: str, value: object) -> Node:
    attrs = dict(node.attrs)
    attrs[name] = value  # type: ignore[assignment]
    return dataclasses.replace(node, attrs=tuple(sorted(attrs.items())))


def test_declines_with_reasons() -> None:
    cnn = model("cnn").graph
    conv = cnn.node("/block1/conv/Conv")
    assert decline_reason(conv, cnn) is None
    assert "grouped" in str(decline_reason(_with(conv, "group", 2), cnn))
    assert "asymmetric" in str(decline_reason(_with(conv, "pads", (0, 0, 1, 1)), cnn))
    assert "fused after" in str(decline_reason(cnn.node("/stem/Relu"), cnn))
    pool = next(n for n in cnn.nodes if n.op == "MaxPool")
    assert decline_reason(pool, cnn) == "no cutlass pattern covers MaxPool"
