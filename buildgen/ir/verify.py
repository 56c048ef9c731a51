"""Invariants every Graph must hold; later stages rely on them instead of re-checking.

A failure here is a bug in buildgen (the importer or a pass that rewrote the graph), not
in the user's model, so it raises IRVerificationError rather than BuildgenError.
"""

from __future__ import annotations

from buildgen.ir.graph import DType, Graph, TensorType
from buildgen.ir.serialize import WEIGHT_ALIGNMENT


class IRVerificationError(RuntimeError):
    """An internal error: the graph IR breaks an invariant."""


_MAX_LISTED = 10


def verify_graph(graph: Graph) -> None:
    """Raise IRVerificationError listing every broken invariant of `graph`."""
    problems = [
        *_check_names(graph),
        *_check_types(graph),
        *_check_weights(graph),
        *_check_nodes(graph),
        *_check_outputs(graph),
    ]
    if problems:
        listed = problems[:_MAX_LISTED]
        more = len(problems) - len(listed)
        lines = [f"internal error: graph '{graph.name}' fails verification:"]
        lines += [f"  - {p}" for p in listed]
        if more:
            lines.append(f"  ... and {more} more")
        raise IRVerificationError("\n".join(lines))


def _check_names(graph: Graph) -> list[str]:
    problems: list[str] = []
    seen_nodes: set[str] = set()
    for index, node in enumerate(graph.nodes):
        if not node.name:
            problems.append(f"node #{index} ({node.op}) has an empty name")
        elif node.name in seen_nodes:
            problems.append(f"node name '{node.name}' is used twice")
        seen_nodes.add(node.name)
    seen_tensors: set[str] = set()
    for kind, items in (("value", graph.values), ("weight", graph.weights)):
        for item in items:
            if not item.name:
                problems.append(f"a {kind} has an empty name")
            elif item.name in seen_tensors:
                problems.append(f"tensor name '{item.name}' is declared twice")
            seen_tensors.add(item.name)
    return problems


def _shape_problem(name: str, tensor_type: TensorType) -> str | None:
    if not isinstance(tensor_type.dtype, DType):
        return f"tensor '{name}' has dtype {tensor_type.dtype!r}, not a DType"
    dims = tensor_type.shape
    if not isinstance(dims, tuple) or any(
        isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in dims
    ):
        return f"tensor '{name}' has shape {dims!r}; every dim must be a static non-negative int"
    return None


def _check_types(graph: Graph) -> list[str]:
    # A zero dim is fine, for run-time tensors and weights alike: an empty tensor (0 bytes)
    # is a value like any other (an empty split piece; the shape [] that reshapes to a
    # scalar), and the backends skip the code that would only write empty tensors.
    tensors = [(v.name, v.type) for v in graph.values] + [(w.name, w.type) for w in graph.weights]
    problems = [_shape_problem(name, tensor_type) for name, tensor_type in tensors]
    declared = {v.name: v.type for v in graph.values}
    for kind, values in (("input", graph.inputs), ("output", graph.outputs)):
        for value in values:
            if value.name not in declared:
                problems.append(f"graph {kind} '{value.name}' is not among the graph's values")
            elif declared[value.name] != value.type:
                problems.append(
                    f"graph {kind} '{value.name}' has type {value.type} but its value has "
                    f"{declared[value.name]}"
                )
    return [p for p in problems if p]


def _check_weights(graph: Graph) -> list[str]:
    problems: list[str] = []
    end = 0
    for weight in graph.weights:
        if weight.offset % WEIGHT_ALIGNMENT:
            problems.append(
                f"weight '{weight.name}' is at offset {weight.offset}, "
                f"not a multiple of {WEIGHT_ALIGNMENT}"
            )
        if weight.offset < end:
            problems.append(
                f"weight '{weight.name}' at offset {weight.offset} overlaps or precedes the "
                f"previous weight, which ends at {end}"
            )
        end = max(end, weight.offset + weight.type.nbytes)
    return problems


def _check_nodes(graph: Graph) -> list[str]:
    problems: list[str] = []
    weights = {w.name for w in graph.weights}
    values = {v.name for v in graph.values}
    defined = set(graph.input_names) | weights
    for node in graph.nodes:
        where = f"node '{node.name}' ({node.op})"
        for tensor in node.inputs:
            if tensor and tensor not in defined:
                problems.append(f"{where} reads '{tensor}' before it is defined")
        for tensor in node.outputs:
            if not tensor:
                continue
            if tensor in defined:
                problems.append(f"{where} writes '{tensor}', which is already defined")
            if tensor not in values:
                problems.append(f"{where} writes '{tensor}', which has no declared value")
            defined.add(tensor)
        names = [key for key, _ in node.attrs]
        if names != sorted(set(names)):
            problems.append(f"{where} has attributes {names}, not sorted and unique")
    for name in sorted(values - defined):
        problems.append(f"value '{name}' is neither a graph input nor written by any node")
    return problems


def _check_outputs(graph: Graph) -> list[str]:
    problems: list[str] = []
    if not graph.outputs:
        problems.append("the graph has no outputs")
    produced = set(graph.input_names) | {t for n in graph.nodes for t in n.outputs if t}
    for value in graph.outputs:
        if value.name not in produced:
            problems.append(
                f"graph output '{value.name}' is neither an input nor written by a node"
            )
    if graph.opset < 1:
        problems.append(f"opset {graph.opset} is not a valid ONNX opset")
    return problems
