"""Hand-built graphs and targets for the partition tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from buildgen.ir import DType, Graph, Node, TensorType, Value, Weight
from buildgen.partition.model import Partition
from buildgen.targets import ResolvedTarget, parse_target, resolve_target

F32 = DType.FLOAT32


def composite(*accelerators: str, name: str = "t") -> ResolvedTarget:
    """A composite target on the c host with `accelerators` in priority order."""
    if not accelerators:
        return resolve_target(name, "c")
    return parse_target(
        {"kind": "composite", "host": {"kind": "c"}, "accelerators": list(accelerators)}, name
    )


def graph(
    nodes: Sequence[Node],
    shapes: Mapping[str, Sequence[int]],
    weights: Sequence[str] = (),
    outputs: Sequence[str] | None = None,
) -> Graph:
    """A float32 graph: `shapes` gives every tensor's shape; `weights` names the constant
    ones; inputs are the other tensors no node produces; outputs default to the last
    node's first output."""
    produced = {t for n in nodes for t in n.outputs}
    used = [t for n in nodes for t in n.inputs if t]
    inputs = [t for t in dict.fromkeys(used) if t not in produced and t not in weights]
    outs = list(outputs) if outputs is not None else [nodes[-1].outputs[0]]
    typed = {t: TensorType(F32, tuple(shapes[t])) for t in shapes}
    values = tuple(Value(t, typed[t]) for t in sorted(set(inputs) | produced))
    weight_list, offset = [], 0
    for name in weights:
        weight_list.append(Weight(name, typed[name], offset))
        offset += -(-typed[name].nbytes // 64) * 64
    return Graph(
        "g", tuple(Value(t, typed[t]) for t in inputs), tuple(Value(t, typed[t]) for t in outs),
        tuple(nodes), values, tuple(weight_list), 17, "g.onnx",
    )


def layout(partition: Partition) -> list[tuple[str, tuple[str, ...]]]:
    """(backend, nodes) of each region, in order."""
    return [(r.target, r.nodes) for r in partition.regions]
