"""import_model: an ONNX file and the manifest's input shapes → graph IR + weights file.

The steps, each in its own module: load (with external data) → check the names → fix input
shapes → name the nodes → flatten If nodes (a condition constant at those shapes picks its
branch; any other keeps both branches and a select), in topological order → ONNX shape
inference → fold constants and propagate static shapes (a select whose condition folds
only now becomes the branch it picks) → convert to the IR (dead code removed, weights laid
out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import error
from buildgen.importer.activations import hard_activations
from buildgen.importer.affine import fold_affine
from buildgen.importer.branches import flatten_ifs, infer_flattened, settle
from buildgen.importer.canonical import canonicalize, drop_identities
from buildgen.importer.convert import GraphSpec, build_graph
from buildgen.importer.denormals import flush_denormal_weights
from buildgen.importer.fold import fold
from buildgen.importer.load import load_onnx, tensor_array
from buildgen.importer.names import check_names
from buildgen.importer.order import name_nodes
from buildgen.importer.shapes import TensorInfo, fix_input_shapes, input_types
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
    opset_imports = list(model.opset_import)
    nodes, selects = flatten_ifs(model, nodes, runtime_inputs, path)
    inferred = infer_flattened(model, nodes, selects, path)

    constants = {t.name: tensor_array(t, path) for t in onnx_graph.initializer}
    types = input_types(onnx_graph, runtime_inputs)
    canonicalize(nodes, constants, inferred, loaded.opset)
    notes: dict[str, str] = {}
    kept = fold(nodes, constants, types, inferred, opset_imports, path, notes)
    settle(kept, selects, _shapes(types, constants), constants, path)

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


def _shapes(types: Mapping[str, TensorInfo], constants: Mapping[str, np.ndarray]
            ) -> dict[str, tuple[int, ...] | None]:
    """Each value's static shape, where known: what the branches of an If are checked by."""
    shapes: dict[str, tuple[int, ...] | None] = {
        name: tuple(int(d or 0) for d in info.shape)
        if info.shape is not None and info.is_static else None
        for name, info in types.items()
    }
    shapes.update({name: tuple(value.shape) for name, value in constants.items()})
    return shapes


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
