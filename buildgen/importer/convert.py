"""The folded ONNX graph → the IR Graph and its weights file.

Dead nodes and unused constants are dropped here, unused optional outputs are
disconnected, and every remaining tensor must have a static shape and an IR dtype. A
static shape may hold zero-sized dims: an empty tensor is a valid value (an empty split
piece, an out-of-range slice) that backends handle without touching memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import error
from buildgen.importer.names import unique_name
from buildgen.importer.shapes import TensorInfo, info_from_array
from buildgen.ir.graph import AttrValue, DType, Graph, Node, TensorType, Value
from buildgen.ir.serialize import dtype_of_array, pack_weights
from buildgen.limits import TENSOR_BYTES

if TYPE_CHECKING:
    import numpy as np
    import onnx

_DTYPES = {1: DType.FLOAT32, 7: DType.INT64, 6: DType.INT32, 9: DType.BOOL}  # TensorProto codes
_SUPPORTED = "float32, int64, int32 and bool"
_MAX_LISTED = 8


@dataclass(frozen=True)
class GraphSpec:
    """What the importer knows after folding, as plain inputs to `build_graph`."""

    name: str
    source: Path
    opset: int
    opset_imports: Sequence[onnx.OperatorSetIdProto]
    inputs: Sequence[str]  # run-time inputs, in the model's order
    outputs: Sequence[str]  # graph outputs, in the model's order
    nodes: Sequence[onnx.NodeProto]  # the kept nodes, topologically sorted
    constants: Mapping[str, np.ndarray]
    types: Mapping[str, TensorInfo]  # types of run-time inputs and of kept nodes' outputs
    fold_notes: Mapping[str, str] = field(default_factory=dict)  # node -> why not folded


def build_graph(spec: GraphSpec) -> tuple[Graph, bytes]:
    nodes, constants, types = _materialize_constant_outputs(spec)
    nodes, live = _live_nodes(nodes, spec.outputs)
    _disconnect_unused_outputs(nodes, live, spec.opset_imports)
    weight_names = _first_use(nodes, constants)
    values, bad_dtypes = _values(spec, nodes, types)
    bad_dtypes += [
        (name, _onnx_dtype_name(constants[name]))
        for name in weight_names
        if dtype_of_array(constants[name]) is None
    ]
    if bad_dtypes:
        raise _dtype_error(spec.source, bad_dtypes)
    _check_element_counts(spec, nodes, {v.name: v.type.shape for v in values}, constants)
    ir_nodes = tuple(_node(n, spec.source) for n in nodes)
    weights, blob = pack_weights([(name, constants[name]) for name in weight_names])
    by_name = {v.name: v for v in values}
    graph = Graph(
        name=spec.name,
        inputs=tuple(by_name[name] for name in spec.inputs),
        outputs=tuple(by_name[name] for name in spec.outputs),
        nodes=ir_nodes,
        values=tuple(values),
        weights=weights,
        opset=spec.opset,
        source=spec.source.as_posix(),
    )
    return graph, blob


def _materialize_constant_outputs(
    spec: GraphSpec,
) -> tuple[list[onnx.NodeProto], dict[str, np.ndarray], dict[str, TensorInfo]]:
    """A graph output that folded to a constant becomes Identity(weight).

    The output keeps its ONNX name (it is part of the C API); the weight gets a new one and
    other readers of the constant are pointed at the weight, so they still see a constant.
    """
    from onnx import helper

    nodes = list(spec.nodes)
    constants = dict(spec.constants)
    types = dict(spec.types)
    taken = {*constants, *spec.types, *(n.name for n in nodes)}
    for output in dict.fromkeys(spec.outputs):
        if output not in constants:
            continue
        weight = unique_name(f"{output}_value", taken)
        constants[weight] = constants.pop(output)
        types[output] = info_from_array(constants[weight])
        for node in nodes:
            for index, name in enumerate(node.input):
                if name == output:
                    node.input[index] = weight
        identity = unique_name(f"Identity_{output}", taken)
        nodes.append(helper.make_node("Identity", [weight], [output], identity))
    return nodes, constants, types


def _live_nodes(
    nodes: Sequence[onnx.NodeProto], outputs: Sequence[str]
) -> tuple[list[onnx.NodeProto], set[str]]:
    """Nodes that contribute to a graph output, and every tensor something reads."""
    live = set(outputs)
    alive: list[onnx.NodeProto] = []
    for node in reversed(nodes):
        if any(name in live for name in node.output if name):
            alive.append(node)
            live.update(name for name in node.input if name)
    alive.reverse()
    return alive, live


def _disconnect_unused_outputs(
    nodes: Sequence[onnx.NodeProto],
    live: set[str],
    opset_imports: Sequence[onnx.OperatorSetIdProto],
) -> None:
    """Blank optional outputs nobody reads (Dropout's mask, BatchNorm's running stats).

    Backends then need not compute them, and they need no static shape.
    """
    from onnx import defs

    versions = {o.domain or "": o.version for o in opset_imports}
    for node in nodes:
        unused = [i for i, name in enumerate(node.output) if name and name not in live]
        if not unused:
            continue
        domain = "" if node.domain == "ai.onnx" else node.domain
        try:
            formal = defs.get_schema(node.op_type, versions.get(domain, 1), domain).outputs
        except defs.SchemaError:
            continue
        optional = defs.OpSchema.FormalParameterOption.Optional
        for index in unused:
            if index < len(formal) and formal[index].option == optional:
                node.output[index] = ""
        while node.output and not node.output[-1]:
            node.output.pop()


def _first_use(nodes: Sequence[onnx.NodeProto], constants: Mapping[str, np.ndarray]) -> list[str]:
    """Constants read by the nodes, in order of first use: the weights file's order."""
    order: dict[str, None] = {}
    for node in nodes:
        for name in node.input:
            if name in constants:
                order.setdefault(name)
    return list(order)


def _values(
    spec: GraphSpec, nodes: Sequence[onnx.NodeProto], types: Mapping[str, TensorInfo]
) -> tuple[list[Value], list[tuple[str, str]]]:
    """The values, and (name, dtype) of those whose dtype the IR lacks."""
    from onnx import TensorProto

    names = list(spec.inputs) + [name for n in nodes for name in n.output if name]
    dynamic: list[str] = []
    values: list[Value] = []
    bad_dtypes: list[tuple[str, str]] = []
    for name in names:
        info = types.get(name, TensorInfo(0, None))
        if not info.is_static:
            dynamic.append(f"'{name}' {_describe(name, info, nodes)}")
            continue
        if info.elem_type not in _DTYPES:
            bad_dtypes.append((name, TensorProto.DataType.Name(info.elem_type).lower()))
            continue
        shape = tuple(int(d) for d in info.shape or () if d is not None)
        values.append(Value(name, TensorType(_DTYPES[info.elem_type], shape)))
    if dynamic:
        listed = "; ".join(dynamic[:_MAX_LISTED])
        more = f" (and {len(dynamic) - _MAX_LISTED} more)" if len(dynamic) > _MAX_LISTED else ""
        unfolded = "".join(
            f"; node '{name}' was not folded: {why}"
            for name, why in list(spec.fold_notes.items())[:_MAX_LISTED]
        )
        raise error(
            f"{spec.source}: tensors without a static shape after folding: {listed}{more}",
            hint="buildgen needs static shapes; data-dependent shapes (NonZero, Unique, ...) "
            f"are not supported{unfolded}",
        )
    if values:  # the largest, so that one raised limit admits the model
        big = max(values, key=lambda v: v.type.nbytes)
        TENSOR_BYTES.check(big.type.nbytes, f"{spec.source}: tensor '{big.name}' of shape "
                                            f"{list(big.type.shape)}, the largest, bytes")
    return values, bad_dtypes


# Ops whose output holds the elements of their input, rearranged at most. ONNX shape
# inference does not check Reshape's element count: a model that gets it wrong is caught
# here (folding used to catch it, but a failed fold now leaves the node to the backends).
_SAME_COUNT = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})


def _check_element_counts(
    spec: GraphSpec,
    nodes: Sequence[onnx.NodeProto],
    shapes: Mapping[str, tuple[int, ...]],
    constants: Mapping[str, np.ndarray],
) -> None:
    for node in nodes:
        if node.op_type not in _SAME_COUNT or node.domain not in ("", "ai.onnx"):
            continue
        source, result = node.input[0], node.output[0]
        before = tuple(constants[source].shape) if source in constants else shapes[source]
        after = shapes[result]
        if prod(before) != prod(after):
            why = spec.fold_notes.get(node.name)
            raise error(
                f"{spec.source}: node '{node.name}' ({node.op_type}) gives '{result}' shape "
                f"{list(after)} ({prod(after)} elements) from '{source}' of shape "
                f"{list(before)} ({prod(before)} elements)",
                hint=f"the model is invalid; {why}" if why else "the model is invalid",
            )


def _describe(name: str, info: TensorInfo, nodes: Sequence[onnx.NodeProto]) -> str:
    producer = next((n for n in nodes if name in n.output), None)
    where = f" from node '{producer.name}' ({producer.op_type})" if producer else ""
    return f"{info.describe()}{where}"


def _dtype_error(source: Path, bad_dtypes: Sequence[tuple[str, str]]) -> Exception:
    listed = ", ".join(
        f"tensor '{name}' has dtype {dtype}" for name, dtype in bad_dtypes[:_MAX_LISTED]
    )
    more = f" (and {len(bad_dtypes) - _MAX_LISTED} more)" if len(bad_dtypes) > _MAX_LISTED else ""
    return error(
        f"{source}: {listed}{more}; buildgen supports {_SUPPORTED}",
        hint="convert the model (or that part of it) to float32 before importing",
    )


def _onnx_dtype_name(array: np.ndarray) -> str:
    from onnx import TensorProto
    from onnx.helper import np_dtype_to_tensor_dtype

    try:
        return TensorProto.DataType.Name(np_dtype_to_tensor_dtype(array.dtype)).lower()
    except (KeyError, ValueError, TypeError):
        return str(array.dtype)


def _node(node: onnx.NodeProto, source: Path) -> Node:
    attrs = sorted(((a.name, _attr(node, a, source)) for a in node.attribute), key=lambda kv: kv[0])
    return Node(
        name=node.name,
        op=node.op_type,
        inputs=tuple(node.input),
        outputs=tuple(node.output),
        attrs=tuple(attrs),
        domain="" if node.domain == "ai.onnx" else node.domain,
    )


def _attr(node: onnx.NodeProto, attr: onnx.AttributeProto, source: Path) -> AttrValue:
    from onnx import AttributeProto as A

    kind = attr.type
    try:
        if kind == A.INT:
            return int(attr.i)
        if kind == A.FLOAT:
            return float(attr.f)  # the float32's exact value, as a double
        if kind == A.STRING:
            return attr.s.decode("utf-8")
        if kind == A.INTS:
            return tuple(int(x) for x in attr.ints)
        if kind == A.FLOATS:
            return tuple(float(x) for x in attr.floats)
        if kind == A.STRINGS:
            return tuple(s.decode("utf-8") for s in attr.strings)
    except UnicodeDecodeError as exc:
        raise error(
            f"{source}: attribute '{attr.name}' of node '{node.name}' is not UTF-8 text"
        ) from exc
    what = {
        A.GRAPH: "a subgraph (control flow is not supported)",
        A.GRAPHS: "subgraphs (control flow is not supported)",
    }.get(kind, f"of type {A.AttributeType.Name(kind)}, which the IR cannot hold")
    raise error(
        f"{source}: attribute '{attr.name}' of node '{node.name}' ({node.op_type}) is {what}"
    )
