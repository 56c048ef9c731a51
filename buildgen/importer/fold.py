"""Constant folding and static shape propagation, one pass in topological order.

A node whose inputs are all constants (initializers, or outputs of nodes folded before
it) is evaluated now and its outputs become constants; so is Shape/Size of a tensor
whose shape is static. That turns the Shape → Gather → Concat → Reshape chains that
exporters emit into a Reshape whose shape input is a constant, and the constant stays
as an int64 weight of the graph (backends read it from the IR at compile time; nothing
is rewritten into attributes). Kept nodes get static output types from ONNX inference,
re-run per node with the folded constants where whole-model inference had to give up.

Ops are evaluated with onnx.reference's implementations (numpy code that follows the
spec for every opset version), loaded once per op type. Folding is an optimization, never
a reason to fail: a node the reference cannot evaluate (a missing variant, a bug in the
reference code) stays in the graph for the backends, and `notes` records why.

Folding must not blow up the weights file either: a result of more than _LARGE_BYTES that
is more than _MAX_GROWTH times the weight bytes it was computed from (ConstantOfShape,
Expand, Tile, Range of small inputs) is not stored. Its node stays and computes it at run
time; the array is kept aside, so nodes that reduce it to something small (a shape, a
scalar) still fold. A ConstantOfShape kept that way becomes Expand(value, shape), the same
tensor through an op the backends share.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from buildgen.importer.shapes import TensorInfo, infer_node, info_from_array

if TYPE_CHECKING:
    import numpy as np
    import onnx

# A folded tensor above this size that grew from its weight inputs stays computed at run time.
_LARGE_BYTES = 16 << 20
_MAX_GROWTH = 4

# Ops never folded: their result is not a function of their inputs (random), or they hold
# subgraphs whose outer-scope reads the evaluator would not see.
_NOT_FOLDABLE = frozenset(
    {
        "Bernoulli",
        "Multinomial",
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "If",
        "Loop",
        "Scan",
        "SequenceMap",
    }
)


def fold(
    nodes: Sequence[onnx.NodeProto],
    constants: MutableMapping[str, np.ndarray],
    types: MutableMapping[str, TensorInfo],
    inferred: dict[str, TensorInfo],
    opset_imports: Sequence[onnx.OperatorSetIdProto],
    source: Path,
    notes: MutableMapping[str, str] | None = None,
) -> list[onnx.NodeProto]:
    """Fold what can be folded; return the nodes that remain, in order.

    `constants` gains the folded tensors. `types` must hold the run-time inputs and gains
    the outputs of kept nodes (static where inference could tell). `notes` gains, per node
    name, why a node whose inputs were all constant was not folded.
    """
    evaluator = _Evaluator(opset_imports, source)
    known: dict[str, np.ndarray] = dict(constants)  # stored constants and large results
    notes = {} if notes is None else notes
    names = {*constants, *types, *(t for n in nodes for t in (*n.input, *n.output))}
    kept: list[onnx.NodeProto] = []
    for node in nodes:
        outputs = _fold_shape(node, types)
        if outputs is None:
            outputs = evaluator.evaluate(node, known, notes)
        if outputs is not None:
            arrays = {
                name: _as_inferred_dtype(array, inferred.get(name))
                for name, array in zip(node.output, outputs, strict=True)
                if name
            }
            known.update(arrays)
            large = _too_large(node, arrays, constants)
            if large is None:
                constants.update(arrays)
                continue
            notes[node.name] = large
            node = _expand_of_constant_of_shape(node, constants, names)
        kept.append(node)
        types.update(_output_types(node, types, constants, inferred, opset_imports))
    return kept


def _too_large(
    node: onnx.NodeProto, arrays: Mapping[str, np.ndarray], constants: Mapping[str, np.ndarray]
) -> str | None:
    """Why the folded `arrays` should not be stored as weights, or None to store them."""
    made = sum(a.nbytes for a in arrays.values())
    spent = sum(constants[name].nbytes for name in node.input if name in constants)
    if made <= _LARGE_BYTES or made <= _MAX_GROWTH * spent:
        return None
    return (
        f"its {made} bytes of constants would be stored for {spent} bytes of weight inputs; "
        "it is computed at run time instead"
    )


def _expand_of_constant_of_shape(
    node: onnx.NodeProto, constants: MutableMapping[str, np.ndarray], names: set[str]
) -> onnx.NodeProto:
    """ConstantOfShape(shape) as Expand(value, shape): the same tensor, through an op the
    backends run (the shape input stays a constant, as Expand needs)."""
    import numpy as np
    from onnx import helper, numpy_helper

    if node.op_type != "ConstantOfShape" or node.domain not in ("", "ai.onnx"):
        return node
    value = np.zeros((), np.float32)
    for attr in node.attribute:
        if attr.name == "value":
            value = numpy_helper.to_array(attr.t).reshape(())
    name, suffix = f"{node.output[0]}_fill", 1
    while name in names:
        name, suffix = f"{node.output[0]}_fill_{suffix}", suffix + 1
    names.add(name)
    constants[name] = value
    return helper.make_node("Expand", [name, node.input[0]], list(node.output), node.name)


def _fold_shape(node: onnx.NodeProto, types: MutableMapping[str, TensorInfo]) -> list[Any] | None:
    """Shape and Size of a run-time tensor whose shape is static."""
    import numpy as np

    if node.domain not in ("", "ai.onnx") or node.op_type not in ("Shape", "Size"):
        return None
    info = types.get(node.input[0])
    if info is None or not info.is_static:
        return None
    dims = [int(d) for d in info.shape or () if d is not None]
    if node.op_type == "Size":
        return [np.array(int(np.prod(dims, dtype=np.int64)), dtype=np.int64)]
    attrs = {a.name: a.i for a in node.attribute}
    # Python slicing clamps and wraps negative bounds exactly as Shape-15's start/end do.
    start, end = attrs.get("start", 0), attrs.get("end", len(dims))
    return [np.array(dims[start:end], dtype=np.int64)]


def _as_inferred_dtype(array: np.ndarray, info: TensorInfo | None) -> np.ndarray:
    """The reference code sometimes returns a wider dtype than the spec (e.g. float64)."""
    import numpy as np
    from onnx.helper import tensor_dtype_to_np_dtype

    array = np.asarray(array)
    if info is not None and info.elem_type:
        expected = tensor_dtype_to_np_dtype(info.elem_type)
        if array.dtype != expected:
            array = array.astype(expected)
    return array


def _output_types(
    node: onnx.NodeProto,
    types: MutableMapping[str, TensorInfo],
    constants: MutableMapping[str, np.ndarray],
    inferred: dict[str, TensorInfo],
    opset_imports: Sequence[onnx.OperatorSetIdProto],
) -> dict[str, TensorInfo]:
    outputs = [name for name in node.output if name]
    result = {name: inferred[name] for name in outputs if name in inferred}
    if all(name in result and result[name].is_static for name in outputs):
        return result
    inputs = {name: types[name] for name in node.input if name in types}
    for name in node.input:
        if name in constants:
            inputs[name] = info_from_array(constants[name])
    for name, info in infer_node(node, opset_imports, inputs, constants).items():
        if name in outputs and (info.is_static or name not in result):
            result[name] = info
    return result


class _Evaluator:
    """Runs one node with onnx.reference's op implementations."""

    def __init__(self, opset_imports: Sequence[onnx.OperatorSetIdProto], source: Path):
        from onnx.reference import ReferenceEvaluator

        self._opsets = {o.domain or "": o.version for o in opset_imports}
        self._opsets.setdefault("", self._opsets.get("ai.onnx", 1))
        self._source = source
        self._classes: dict[str, Any] = {}
        self._run_params = {
            "log": lambda *args: None,
            "opsets": self._opsets,
            "verbose": 0,
            "new_ops": None,
            "existing_functions": {},
            "evaluator_cls": ReferenceEvaluator,
        }

    def evaluate(
        self,
        node: onnx.NodeProto,
        constants: Mapping[str, np.ndarray],
        notes: MutableMapping[str, str],
    ) -> list[np.ndarray] | None:
        """The node's outputs, or None when it cannot be folded (`notes` says why, when
        the reference code failed on it)."""
        import numpy as np

        if node.domain not in ("", "ai.onnx") or node.op_type in _NOT_FOLDABLE:
            return None
        if any(name and name not in constants for name in node.input):
            return None
        if any(attr.HasField("g") or len(attr.graphs) for attr in node.attribute):
            return None
        op_class = self._op_class(node.op_type)
        if op_class is None:
            return None
        # The reference code reads an omitted optional input as None.
        args = [constants[name] if name else None for name in node.input]
        try:
            with np.errstate(all="ignore"):
                results = op_class(node, self._run_params).run(*args)
        except Exception as exc:  # a variant the reference lacks, or a bug in it
            # The node stays in the graph; a backend runs it (or says why it cannot).
            notes[node.name] = f"folding it failed: {type(exc).__name__}: {exc}"
            return None
        if not all(isinstance(r, np.ndarray | np.generic) for r in results):
            return None  # sequences and optionals are not tensors the IR can hold
        if len(results) < len(node.output):
            return None  # the reference skipped an output the graph names
        # Trailing results the node does not name (omitted optional outputs) are dropped.
        return [np.asarray(r) for r in results[: len(node.output)]]

    def _op_class(self, op_type: str) -> Any:
        if op_type not in self._classes:
            from onnx.reference import ReferenceEvaluator
            from onnx.reference.ops import load_op

            try:
                self._classes[op_type] = load_op(
                    "", op_type, self._opsets[""], evaluator_cls=ReferenceEvaluator
                )
            except Exception:  # no reference implementation (or a context-dependent one)
                self._classes[op_type] = None
        return self._classes[op_type]
