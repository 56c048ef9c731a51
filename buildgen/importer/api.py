"""import_model: an ONNX file and the manifest's input shapes → graph IR + weights file.

The steps, each in its own module: load (with external data) → name and order the nodes
→ fix input shapes → ONNX shape inference → fold constants and propagate static shapes →
convert to the IR (dead code removed, weights laid out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import error
from buildgen.importer.activations import hard_activations
from buildgen.importer.affine import fold_affine
from buildgen.importer.canonical import canonicalize, drop_identities
from buildgen.importer.convert import GraphSpec, build_graph
from buildgen.importer.denormals import flush_denormal_weights
from buildgen.importer.fold import fold
from buildgen.importer.load import load_onnx
from buildgen.importer.names import check_names
from buildgen.importer.order import name_nodes, topological_order
from buildgen.importer.shapes import TensorInfo, fix_input_shapes, infer_model, info_from_type
from buildgen.ir.graph import Graph
from buildgen.ir.verify import verify_graph

if TYPE_CHECKING:
    import numpy as np
    import onnx


@dataclass(frozen=True)
class ImportResult:
    graph: Graph
    weights_blob: bytes  # the weights file's bytes (see buildgen.ir.serialize)
    files_read: tuple[Path, ...]  # the .onnx file, then its external-data files: for a depfile


def import_model(
    onnx_path: Path,
    input_shapes: Mapping[str, Sequence[int]],
    *,
    model_name: str | None = None,
) -> ImportResult:
    """Import an ONNX model with every dynamic input dim fixed by `input_shapes`.

    `model_name` is the manifest's name for the model, used in messages
    (default: the file's stem). Graph.source is `onnx_path` as given, so pass a path
    relative to the build folder to keep the output free of absolute paths.
    """
    path = Path(onnx_path)
    loaded = load_onnx(path)
    model = loaded.model
    onnx_graph = model.graph
    check_names(onnx_graph, path, model_name or path.stem)
    if len(onnx_graph.sparse_initializer):
        raise error(f"{path}: sparse initializers are not supported")

    initializers = {t.name for t in onnx_graph.initializer}
    # An initializer that is also listed as a graph input is a weight, not a run-time input.
    runtime_inputs = list(
        dict.fromkeys(i.name for i in onnx_graph.input if i.name not in initializers)
    )
    if "" in runtime_inputs or "" in initializers:  # '' is ONNX's "no tensor", not a name
        what = "a graph input" if "" in runtime_inputs else "an initializer"
        raise error(f"{path}: {what} has an empty name")
    fix_input_shapes(onnx_graph, runtime_inputs, input_shapes, path, model_name or path.stem)

    nodes = list(onnx_graph.node)
    name_nodes(nodes)
    _check_attributes_once(nodes, path)
    nodes = topological_order(nodes, [*initializers, *runtime_inputs], path)
    inferred = infer_model(model, nodes, path)

    constants = {t.name: _tensor_array(t, path) for t in onnx_graph.initializer}
    declared = {i.name: i for i in onnx_graph.input}
    types: dict[str, TensorInfo] = {}
    for name in runtime_inputs:
        info = info_from_type(declared[name].type)
        if info is not None:
            types[name] = info
    canonicalize(nodes, constants, inferred, loaded.opset)
    opset_imports = list(model.opset_import)
    notes: dict[str, str] = {}
    kept = fold(nodes, constants, types, inferred, opset_imports, path, notes)

    outputs = [o.name for o in onnx_graph.output]
    kept = hard_activations(drop_identities(kept, outputs, constants), constants, outputs)
    kept = fold_affine(kept, constants, inferred, outputs)
    flush_denormal_weights(constants)
    _check_outputs(
        outputs, {*runtime_inputs, *constants, *(t for n in kept for t in n.output)}, path
    )
    spec = GraphSpec(
        name=onnx_graph.name or path.stem,
        source=path,
        opset=loaded.opset,
        opset_imports=opset_imports,
        inputs=runtime_inputs,
        outputs=outputs,
        nodes=kept,
        constants=constants,
        types=types,
        fold_notes=notes,
    )
    graph, blob = build_graph(spec)
    verify_graph(graph)  # an importer bug must not reach later stages
    return ImportResult(graph, blob, loaded.files_read)


def _check_outputs(outputs: Sequence[str], defined: set[str], path: Path) -> None:
    if not outputs:
        raise error(f"{path}: the model has no outputs")
    for name in outputs:
        if name not in defined:
            raise error(f"{path}: graph output '{name}' is not written by any node")


def _check_attributes_once(nodes: Sequence[onnx.NodeProto], path: Path) -> None:
    """ONNX's checker refuses a repeated attribute; the IR has one value per attribute.
    (A function of its own: a `node` local left in import_model's frame would make a crash
    report blame that node.)"""
    for node in nodes:
        names = [attribute.name for attribute in node.attribute]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise error(f"{path}: node '{node.name}' ({node.op_type}) has attribute "
                        f"'{twice[0]}' more than once")


def _tensor_array(tensor: onnx.TensorProto, path: Path) -> np.ndarray:
    from onnx import numpy_helper

    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:  # data that does not fit its dims or dtype: numpy's ValueError
        raise error(f"{path}: initializer '{tensor.name}' is malformed: {exc}") from exc
