"""Checks shared by the op families: dtypes, ranks, constant inputs, attribute reading."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from buildgen.ir import DType, Graph, Node

FLOAT = frozenset({DType.FLOAT32})
INTS = frozenset({DType.INT64, DType.INT32})
NUMERIC = FLOAT | INTS
ANY = NUMERIC | {DType.BOOL}


def present(names: Iterable[str]) -> list[str]:
    """Tensor names without the "" that marks an omitted optional input."""
    return [n for n in names if n]


def input_at(node: Node, index: int) -> str:
    return node.inputs[index] if index < len(node.inputs) else ""


def dtype_reason(
    node: Node, graph: Graph, allowed: frozenset[DType], tensors: Sequence[str] | None = None
) -> str | None:
    """A decline reason if any of `tensors` (default: every input and output) has a dtype
    outside `allowed`."""
    names = present(tensors if tensors is not None else (*node.inputs, *node.outputs))
    for name in names:
        dtype = graph.type_of(name).dtype
        if dtype not in allowed:
            kinds = "/".join(sorted(d.value for d in allowed))
            return f"dtype {dtype.value} not supported by {node.op} ({kinds} only)"
    return None


def float_reason(node: Node, graph: Graph) -> str | None:
    return dtype_reason(node, graph, FLOAT)


def constant_reason(node: Node, graph: Graph, index: int, what: str) -> str | None:
    """Inputs whose values shape the generated loops (axes, pads, starts) must be weights."""
    name = input_at(node, index)
    if name and not graph.is_weight(name):
        return f"{node.op} with a run-time '{what}' input not supported (must be a constant)"
    return None


def int_attr(node: Node, name: str, default: int) -> int:
    value = node.attr(name, default)
    assert isinstance(value, int)
    return value


def float_attr(node: Node, name: str, default: float) -> float:
    value = node.attr(name, default)
    assert isinstance(value, (int, float))
    return float(value)


def ints_attr(node: Node, name: str, default: Sequence[int] = ()) -> tuple[int, ...]:
    value = node.attr(name, tuple(default))
    assert isinstance(value, tuple)
    return tuple(int(v) for v in value)


def str_attr(node: Node, name: str, default: str) -> str:
    value = node.attr(name, default)
    assert isinstance(value, str)
    return value


def normalize_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis
