"""import_model: an ONNX file and the manifest's input shapes → graph IR + weights file.

The steps, each in its own module: load (with external data) → name the nodes → flatten
If nodes into both branches and a select → order the nodes → fix input shapes → ONNX shape
inference → fold constants and propagate static shapes (a select on a constant condition
becomes the branch it picks) → convert to the IR (dead code removed, weights laid out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import BuildgenError, error
from buildgen.importer.activations import hard_activations
from buildgen.importer.affine import fold_affine
from buildgen.importer.branches import Select, has_if, inline_ifs, settle
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
    opset_imports = list(model.opset_import)
    selects: list[Select] = []
    while has_if(nodes):  # one level of If nodes a pass, outermost first
        nodes = topological_order(nodes, _defined(onnx_graph, runtime_inputs), path)
        ready, decided = _conditions(model, nodes, runtime_inputs, selects, path)
        nodes, inlined = inline_ifs(nodes, onnx_graph, path, ready, decided)
        selects += inlined
    _refuse_loops(nodes, path)
    nodes = topological_order(nodes, _defined(onnx_graph, runtime_inputs), path)
    inferred = _infer_flattened(model, nodes, selects, path)

    constants = {t.name: _tensor_array(t, path) for t in onnx_graph.initializer}
    types = _input_types(onnx_graph, runtime_inputs)
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


def _refuse_loops(nodes: Sequence[onnx.NodeProto], path: Path) -> None:
    """Before inference, which would only report the loop's results as of unknown shape."""
    for node in nodes:
        if node.op_type in ("Loop", "Scan") and node.domain in ("", "ai.onnx"):
            raise error(
                f"{path}: node '{node.name}' ({node.op_type}) repeats a subgraph, a number "
                "of times known only at run time: loops are not supported (control flow)",
                hint="cut the model before the loop (run it from your code), or export it "
                     "unrolled for the length you run")


def _infer_flattened(model: onnx.ModelProto, nodes: Sequence[onnx.NodeProto],
                     selects: Sequence[Select], path: Path,
                     outputs: Sequence[str] | None = None) -> dict[str, TensorInfo]:
    """infer_model, saying so when what fails came from a branch of an If decided at run
    time: both of its branches are compiled at the manifest's shapes."""
    try:
        return infer_model(model, nodes, path, outputs)
    except BuildgenError as exc:
        text = str(exc)
        culprit = next((s for s in selects if f"'{s.node}/" in text or f" {s.node}/" in text),
                       None)
        if culprit is None:
            raise
        raise error(
            text.removeprefix("error: ").strip(),
            hint=f"that node comes from a branch of If '{culprit.node}', whose condition "
                 f"('{culprit.condition}') is known only at run time: "
                 "both branches are compiled, at the shapes the manifest gives, and this "
                 "one is not valid at them. Export the model for the branch you run (or "
                 "with that condition a constant), or give the shapes that branch expects",
        ) from exc


def _defined(graph: onnx.GraphProto, runtime_inputs: Sequence[str]) -> list[str]:
    return [*(t.name for t in graph.initializer), *runtime_inputs]


def _input_types(graph: onnx.GraphProto, runtime_inputs: Sequence[str]
                 ) -> dict[str, TensorInfo]:
    declared = {i.name: i for i in graph.input}
    types: dict[str, TensorInfo] = {}
    for name in runtime_inputs:
        info = info_from_type(declared[name].type)
        if info is not None:
            types[name] = info
    return types


def _conditions(model: onnx.ModelProto, nodes: Sequence[onnx.NodeProto],
                runtime_inputs: Sequence[str], selects: Sequence[Select], path: Path
                ) -> tuple[set[str], dict[str, bool]]:
    """(The If conditions this pass can decide on: those that depend on no If's result,
    the value of each of them that folds to a constant at the manifest's shapes.) A
    constant one (a Shape compared with a number, a flag in the weights) is found by
    folding copies of the nodes it depends on alone: the branch not taken is then never
    inlined, nor inferred (it need not be valid at these shapes: silero's is not). One
    that depends on an If's result waits for a later pass, when that If is gone."""
    import onnx

    # `nodes` are in topological order: a node is plain when no subgraph is on its path.
    produced = {output for node in nodes for output in node.output}
    plain: dict[str, onnx.NodeProto] = {}
    for node in nodes:
        subgraph = any(attr.HasField("g") or attr.graphs for attr in node.attribute)
        if not subgraph and all(name in plain or name not in produced for name in node.input):
            plain.update((output, node) for output in node.output if output)
    conditions = [node.input[0] for node in nodes if node.op_type == "If" and node.input
                  and (node.input[0] in plain or node.input[0] not in produced)]
    needed: set[int] = set()
    pending = list(conditions)
    while pending:
        producer = plain.get(pending.pop())
        if producer is not None and id(producer) not in needed:
            needed.add(id(producer))
            pending.extend(producer.input)
    copies = []
    for node in nodes:
        if id(node) in needed:
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            copies.append(copy)
    inferred = _infer_flattened(model, copies, selects, path, outputs=conditions)
    constants = {t.name: _tensor_array(t, path) for t in model.graph.initializer}
    fold(copies, constants, _input_types(model.graph, runtime_inputs), inferred,
         list(model.opset_import), path, {})
    return set(conditions), {name: bool(constants[name].reshape(-1)[0])
                             for name in conditions
                             if name in constants and constants[name].size == 1}


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


def _tensor_array(tensor: onnx.TensorProto, path: Path) -> np.ndarray:
    from onnx import numpy_helper

    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:  # data that does not fit its dims or dtype: numpy's ValueError
        raise error(f"{path}: initializer '{tensor.name}' is malformed: {exc}") from exc
