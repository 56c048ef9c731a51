"""The distinct candidate kernels of some models and targets, each as a standalone graph.

Every candidate the cost policy would weigh (every backend's, the host's included) is
keyed as a tuning record is; kernels with one key are one kernel, whichever models and
targets hold it, so each is built and measured once. A kernel's graph is its nodes cut out
of the model: the region's inputs become graph inputs, its outputs graph outputs, and the
weights it reads come along with their values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from buildgen.ir import Graph, Value
from buildgen.partition.boundaries import region_io
from buildgen.partition.model import Partition, Region
from buildgen.targets import ResolvedTarget

if TYPE_CHECKING:
    import numpy as np

    from buildgen.stages.api import ImportedModel


@dataclass(frozen=True)
class Kernel:
    key: str  # canonical key text of its tuning record
    digest: str  # short digest of the key: its work folder's name
    backend: str
    pattern: str
    nodes: tuple[str, ...]
    graph: Graph  # the model it was found in
    target: ResolvedTarget  # a target holding it (all holding it agree on its options)
    where: str  # "model/target", for messages

    def describe(self) -> str:
        ops = "+".join(self.graph.node(n).op for n in self.nodes)
        io = region_io(self.graph, Region("k", self.backend, self.nodes))
        def shapes(names: Sequence[str]) -> str:
            return " ".join(str(list(self.graph.type_of(t).shape)) for t in names)

        name = self.pattern or self.backend
        return f"{name} {ops} {shapes(io.inputs)} -> {shapes(io.outputs)}"


def collect_kernels(
    graph: Graph, target: ResolvedTarget, pins: Sequence[tuple[str, str]], where: str,
) -> list[Kernel]:
    """Every candidate kernel of one model and target, with its record key."""
    from buildgen.partition.convexity import NodeGraph
    from buildgen.partition.cost.keys import key_digest, key_text
    from buildgen.partition.cost.policy import CostTable, cost_candidates
    from buildgen.partition.pins import resolve_pins
    from buildgen.partition.policy import PolicyInput

    inp = PolicyInput(graph, NodeGraph(graph), target, resolve_pins(graph, target, pins))
    table = CostTable(graph, target, None)
    kernels = []
    for cand in cost_candidates(inp):
        key = table.key(cand)
        kernels.append(Kernel(
            key_text(key), key_digest(key), cand.backend, cand.pattern,
            tuple(graph.nodes[i].name for i in cand.nodes), graph, target, where,
        ))
    return kernels


def kernel_model(kernel: Kernel, weights: Mapping[str, np.ndarray]) -> ImportedModel:
    """The kernel's nodes as a graph of their own, with the weights they read."""
    from buildgen.ir.serialize import pack_weights
    from buildgen.ir.verify import verify_graph
    from buildgen.stages.api import ImportedModel

    graph = kernel.graph
    nodes = tuple(graph.node(n) for n in kernel.nodes)
    io = region_io(graph, Region("k", kernel.backend, kernel.nodes))
    used = list(dict.fromkeys(t for n in nodes for t in n.inputs if t and graph.is_weight(t)))
    packed, blob = pack_weights([(w, weights[w]) for w in used])
    tensors = dict.fromkeys(t for n in nodes for t in (*n.inputs, *n.outputs)
                            if t and not graph.is_weight(t))
    mini = Graph(
        name="kernel",
        inputs=tuple(Value(t, graph.type_of(t)) for t in io.inputs),
        outputs=tuple(Value(t, graph.type_of(t)) for t in io.outputs),
        nodes=nodes,
        values=tuple(Value(t, graph.type_of(t)) for t in tensors),
        weights=packed,
        opset=graph.opset,
        source=f"{kernel.where}: {', '.join(kernel.nodes)}",
    )
    verify_graph(mini)
    return ImportedModel(mini, blob)


def kernel_partition(kernel: Kernel, model: ImportedModel) -> Partition:
    """The kernel's graph as one region on its backend."""
    region = Region("r0", kernel.backend, kernel.nodes, "tuning", kernel.pattern)
    return Partition("kernel", kernel.target.name, model.digest, (region,))
