"""The subgraphs a node holds (If's branches, Loop's and Scan's bodies), and every node
of a list with theirs: the walks the import's passes share."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs among `node`'s attributes, one attribute after another."""
    for attribute in node.attribute:
        if attribute.HasField("g"):
            yield attribute.g
        yield from attribute.graphs


def every_node(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
    """`nodes`, each followed by the nodes of its subgraphs, at any depth."""
    for node in nodes:
        yield node
        for graph in subgraphs(node):
            yield from every_node(graph.node)
