"""What crosses a region's edge: the tensors it reads from outside and writes for outside.

Every stage that needs a region's signature (backend codegen, the executor) asks here,
so they agree on order: inputs by first use, outputs by production order.
"""

from __future__ import annotations

from dataclasses import dataclass

from buildgen.ir import Graph
from buildgen.partition.model import Region


@dataclass(frozen=True)
class RegionIO:
    inputs: tuple[str, ...]  # non-weight tensors read by the region, produced outside it
    outputs: tuple[str, ...]  # tensors produced in the region and used outside it
    internal: tuple[str, ...]  # tensors produced and used only inside the region


def region_io(graph: Graph, region: Region) -> RegionIO:
    members = set(region.nodes)
    produced: list[str] = []
    inputs: list[str] = []
    for name in region.nodes:
        node = graph.node(name)
        for tensor in node.inputs:
            if not tensor or graph.is_weight(tensor) or tensor in produced or tensor in inputs:
                continue
            inputs.append(tensor)
        produced.extend(t for t in node.outputs if t)
    graph_outputs = set(graph.output_names)
    outputs: list[str] = []
    internal: list[str] = []
    for tensor in produced:
        used_outside = any(c.name not in members for c in graph.consumers(tensor))
        (outputs if used_outside or tensor in graph_outputs else internal).append(tensor)
    return RegionIO(tuple(inputs), tuple(outputs), tuple(internal))
