"""graph.json and the raw weights file: the import stage's outputs, read by every later stage.

graph.json is deterministic JSON (sorted keys, IR order for lists, floats written with
repr so they read back bit for bit) that starts with a format header. Its sha256
(`graph_digest`) names the graph in partition files and cache keys, so two imports of one
model must give the same bytes.

The weights file holds each weight's little-endian bytes at `Weight.offset`, 64-byte
aligned, in the order of `Graph.weights`, with zero padding between and nothing after
the last weight. numpy is imported only by the functions that touch weight bytes, so
stages that only read the graph stay quick to start.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from buildgen.errors import error
from buildgen.ir.graph import AttrValue, DType, Graph, Node, TensorType, Value, Weight

if TYPE_CHECKING:
    import numpy as np

FORMAT = "buildgen-graph"
VERSION = 1
WEIGHT_ALIGNMENT = 64

# Little-endian on every host: the weights file is the same bytes wherever it was made.
_NUMPY_DTYPES = {DType.FLOAT32: "<f4", DType.INT64: "<i8", DType.INT32: "<i4", DType.BOOL: "|b1"}
_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


# ---------------------------------------------------------------- graph.json


def dump_graph(graph: Graph) -> str:
    """The graph as deterministic JSON text (ends with a newline)."""
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "name": graph.name,
        "source": graph.source,
        "opset": graph.opset,
        "inputs": [_value_doc(v) for v in graph.inputs],
        "outputs": [_value_doc(v) for v in graph.outputs],
        "values": [_value_doc(v) for v in graph.values],
        "weights": [{**_value_doc(w), "offset": w.offset} for w in graph.weights],
        "nodes": [_node_doc(n) for n in graph.nodes],
    }
    # One top-level key per line and one list item (node, value, weight) per line: the
    # file stays small yet diffs line by line when a model changes.
    lines = []
    for key in sorted(doc):
        value = doc[key]
        if isinstance(value, list) and value:
            items = ",\n".join(" " + _compact(item) for item in value)
            lines.append(f"{_compact(key)}: [\n{items}\n]")
        else:
            lines.append(f"{_compact(key)}: {_compact(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _compact(value: object) -> str:
    # allow_nan=False: non-finite floats are spelled as strings by _attr_doc, so the file
    # stays strict JSON that any reader accepts.
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False
    )


def graph_digest(text: str) -> str:
    """sha256 hex of graph.json text, as recorded in partition files."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_graph(source: str | os.PathLike[str]) -> Graph:
    """Read a graph from a path, or from JSON text when `source` is a str starting with '{'."""
    if isinstance(source, str) and source.lstrip().startswith("{"):
        where, text = "<graph text>", source
    else:
        where = os.fspath(source)
        try:
            text = Path(where).read_text(encoding="utf-8")
        except OSError as exc:
            raise error(f"{where}: cannot read graph file: {exc.strerror or exc}") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(
            f"{where}:{exc.lineno}:{exc.colno}: graph file is not valid JSON: {exc.msg}"
        ) from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise error(f'{where}: not a buildgen graph file (expected "format": "{FORMAT}")')
    if doc.get("version") != VERSION:
        raise error(
            f"{where}: graph file version {doc.get('version')!r} is not supported "
            f"(this buildgen reads version {VERSION})",
            hint="re-run the import stage with this buildgen",
        )
    try:
        return _graph_from_doc(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise error(f"{where}: malformed graph file: {type(exc).__name__}: {exc}") from exc


def _value_doc(value: Value | Weight) -> dict[str, Any]:
    return {"name": value.name, "dtype": value.type.dtype.value, "shape": list(value.type.shape)}


def _node_doc(node: Node) -> dict[str, Any]:
    return {
        "name": node.name,
        "op": node.op,
        "domain": node.domain,
        "inputs": list(node.inputs),
        "outputs": list(node.outputs),
        "attrs": {name: _attr_doc(value) for name, value in node.attrs},
    }


def _float_doc(x: float) -> float | str:
    if math.isfinite(x):
        return x  # json writes float.__repr__, the shortest text that reads back exactly
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _attr_doc(value: AttrValue) -> dict[str, Any]:
    # The type is spelled out so an empty tuple, or 1.0 against 1, reads back as written.
    if isinstance(value, bool):
        raise TypeError(f"bool attribute value {value!r}: the IR has no bool attributes")
    if isinstance(value, int):
        return {"type": "int", "value": value}
    if isinstance(value, float):
        return {"type": "float", "value": _float_doc(value)}
    if isinstance(value, str):
        return {"type": "string", "value": value}
    strings = [x for x in value if isinstance(x, str)]
    ints = [x for x in value if isinstance(x, int) and not isinstance(x, bool)]
    numbers = [float(x) for x in value if isinstance(x, int | float) and not isinstance(x, bool)]
    if value and len(strings) == len(value):
        return {"type": "strings", "value": strings}
    if len(ints) == len(value):  # the empty tuple lands here: () reads back as ()
        return {"type": "ints", "value": ints}
    if len(numbers) == len(value):
        return {"type": "floats", "value": [_float_doc(x) for x in numbers]}
    raise TypeError(f"attribute value {value!r} mixes element types")


def _float_from_doc(x: float | str) -> float:
    return _NON_FINITE[x] if isinstance(x, str) else float(x)


def _attr_from_doc(doc: Mapping[str, Any]) -> AttrValue:
    kind, value = doc["type"], doc["value"]
    if kind == "int":
        return int(value)
    if kind == "float":
        return _float_from_doc(value)
    if kind == "string":
        return str(value)
    if kind == "ints":
        return tuple(int(x) for x in value)
    if kind == "floats":
        return tuple(_float_from_doc(x) for x in value)
    if kind == "strings":
        return tuple(str(x) for x in value)
    raise ValueError(f"unknown attribute type {kind!r}")


def _type_from_doc(doc: Mapping[str, Any]) -> TensorType:
    return TensorType(DType(doc["dtype"]), tuple(int(d) for d in doc["shape"]))


def _value_from_doc(doc: Mapping[str, Any]) -> Value:
    return Value(str(doc["name"]), _type_from_doc(doc))


def _node_from_doc(doc: Mapping[str, Any]) -> Node:
    return Node(
        name=str(doc["name"]),
        op=str(doc["op"]),
        inputs=tuple(str(x) for x in doc["inputs"]),
        outputs=tuple(str(x) for x in doc["outputs"]),
        attrs=tuple((str(k), _attr_from_doc(v)) for k, v in sorted(doc["attrs"].items())),
        domain=str(doc["domain"]),
    )


def _graph_from_doc(doc: Mapping[str, Any]) -> Graph:
    return Graph(
        name=str(doc["name"]),
        inputs=tuple(_value_from_doc(v) for v in doc["inputs"]),
        outputs=tuple(_value_from_doc(v) for v in doc["outputs"]),
        nodes=tuple(_node_from_doc(n) for n in doc["nodes"]),
        values=tuple(_value_from_doc(v) for v in doc["values"]),
        weights=tuple(
            Weight(str(w["name"]), _type_from_doc(w), int(w["offset"])) for w in doc["weights"]
        ),
        opset=int(doc["opset"]),
        source=str(doc["source"]),
    )


# ---------------------------------------------------------------- weights file


def numpy_dtype(dtype: DType) -> np.dtype[Any]:
    """The explicit little-endian numpy dtype of an IR dtype."""
    import numpy as np

    return np.dtype(_NUMPY_DTYPES[dtype])


def dtype_of_array(array: np.ndarray) -> DType | None:
    """The IR dtype of a numpy array, or None when the IR has no such dtype."""
    kind_size = (array.dtype.kind, array.dtype.itemsize)
    return {
        ("f", 4): DType.FLOAT32,
        ("i", 8): DType.INT64,
        ("i", 4): DType.INT32,
        ("b", 1): DType.BOOL,
    }.get(kind_size)


def weights_size(graph: Graph) -> int:
    """Byte size of the weights file that belongs to `graph`."""
    return max((w.offset + w.type.nbytes for w in graph.weights), default=0)


def pack_weights(arrays: Sequence[tuple[str, np.ndarray]]) -> tuple[tuple[Weight, ...], bytes]:
    """Lay the arrays out in the given order at 64-byte-aligned offsets.

    Returns the IR weights (with their offsets) and the weights file's bytes.
    """
    import numpy as np

    weights: list[Weight] = []
    offset = 0
    for name, array in arrays:
        dtype = dtype_of_array(array)
        if dtype is None:
            raise ValueError(f"weight {name!r} has dtype {array.dtype}, which the IR lacks")
        offset += -offset % WEIGHT_ALIGNMENT
        tensor_type = TensorType(dtype, tuple(int(d) for d in array.shape))
        weights.append(Weight(name, tensor_type, offset))
        offset += tensor_type.nbytes
    # One buffer written in place: the largest models hold hundreds of MB of weights.
    blob = np.zeros(offset, dtype=np.uint8)
    for weight, (_, array) in zip(weights, arrays, strict=True):
        size = weight.type.nbytes
        view = blob[weight.offset : weight.offset + size].view(numpy_dtype(weight.type.dtype))
        view[...] = np.asarray(array).reshape(-1)
    return tuple(weights), blob.tobytes()


def load_weights(graph: Graph, source: str | os.PathLike[str] | bytes) -> dict[str, np.ndarray]:
    """Read-only arrays of every weight of `graph`, viewing the file (memory-mapped) or bytes."""
    import numpy as np

    expected = weights_size(graph)
    if isinstance(source, bytes):
        where, buffer = "<weights bytes>", np.frombuffer(source, dtype=np.uint8)
    else:
        where = os.fspath(source)
        try:
            size = os.path.getsize(where)
            # mmap refuses empty files; a graph without weights has one.
            buffer = (
                np.memmap(where, dtype=np.uint8, mode="r")
                if size
                else np.frombuffer(b"", dtype=np.uint8)
            )
        except OSError as exc:
            raise error(f"{where}: cannot read weights file: {exc.strerror or exc}") from exc
    if buffer.size != expected:
        raise error(
            f"{where}: weights file has {buffer.size} bytes but graph '{graph.name}' "
            f"expects {expected}",
            hint="the graph and weights files come from different imports; re-run the import stage",
        )
    arrays: dict[str, np.ndarray] = {}
    for weight in graph.weights:
        raw = buffer[weight.offset : weight.offset + weight.type.nbytes]
        array = np.asarray(raw).view(numpy_dtype(weight.type.dtype)).reshape(weight.type.shape)
        array.flags.writeable = False
        arrays[weight.name] = array
    return arrays
