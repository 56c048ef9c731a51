"""Tensor types during import: input shapes from the manifest, and ONNX shape inference.

Shapes here may still be partly unknown (a dim of None); the importer's job is to end
with none, which the fold pass achieves by turning shape computations into constants.
"""

from __future__ import annotations

import difflib
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import error

if TYPE_CHECKING:
    import numpy as np
    import onnx

# Initializers above this size are hidden from whole-model inference: only small integer
# tensors (shapes, axes) feed data propagation, and copying big weights into the inference
# call would make import time grow with model size.
_INFERENCE_DATA_LIMIT = 4096


@dataclass(frozen=True)
class TensorInfo:
    elem_type: int  # onnx.TensorProto.DataType; 0 when unknown
    shape: tuple[int | None, ...] | None  # None: rank unknown; a None dim: size unknown

    @property
    def is_static(self) -> bool:
        return self.elem_type != 0 and self.shape is not None and None not in self.shape

    def describe(self) -> str:
        if self.shape is None:
            return "unknown rank"
        return "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"


def info_from_type(type_proto: onnx.TypeProto) -> TensorInfo | None:
    """TensorInfo of a tensor type, None for sequences, maps and optionals.

    A dim is dynamic (None) when it is symbolic (dim_param), missing, or negative: some
    exporters (PaddlePaddle) write a dynamic dim as `dim_value: -1`.
    """
    if type_proto.WhichOneof("value") != "tensor_type":
        return None
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return TensorInfo(tensor.elem_type, None)
    return TensorInfo(tensor.elem_type, tuple(_static_dim(d) for d in tensor.shape.dim))


def input_types(graph: onnx.GraphProto, runtime_inputs: Sequence[str]
                ) -> dict[str, TensorInfo]:
    """The declared type of each run-time input that has one."""
    declared = {value.name: value for value in graph.input}
    types: dict[str, TensorInfo] = {}
    for name in runtime_inputs:
        info = info_from_type(declared[name].type)
        if info is not None:
            types[name] = info
    return types


def _static_dim(dim: onnx.TensorShapeProto.Dimension) -> int | None:
    return dim.dim_value if dim.HasField("dim_value") and dim.dim_value >= 0 else None


def dynamic_dims_as_unknown(values: Sequence[onnx.ValueInfoProto]) -> list[onnx.ValueInfoProto]:
    """Copies of `values` whose negative dims (`dim_value: -1`) are unknown dims instead,
    which ONNX shape inference then fills in rather than rejects as a conflict."""
    cleaned = []
    for value in values:
        copy = type(value)()
        copy.CopyFrom(value)
        if copy.type.WhichOneof("value") == "tensor_type":
            for dim in copy.type.tensor_type.shape.dim:
                if dim.HasField("dim_value") and dim.dim_value < 0:
                    dim.Clear()
        cleaned.append(copy)
    return cleaned


def info_from_array(array: np.ndarray) -> TensorInfo:
    from onnx.helper import np_dtype_to_tensor_dtype

    return TensorInfo(np_dtype_to_tensor_dtype(array.dtype), tuple(int(d) for d in array.shape))


def type_from_info(info: TensorInfo) -> onnx.TypeProto:
    from onnx import helper

    return helper.make_tensor_type_proto(info.elem_type, info.shape)


def fix_input_shapes(
    graph: onnx.GraphProto,
    runtime_inputs: Sequence[str],
    input_shapes: Mapping[str, Sequence[int]],
    source: Path,
    model_name: str,
) -> None:
    """Write the manifest's input shapes into the graph inputs (in place) and check them."""
    by_name = {i.name: i for i in graph.input}
    where = f"models.{model_name}.inputs"
    for name, dims in input_shapes.items():
        if name not in runtime_inputs:
            close = difflib.get_close_matches(name, runtime_inputs, n=1)
            hint = f"did you mean '{close[0]}'?" if close else None
            known = ", ".join(f"'{n}'" for n in runtime_inputs) or "none"
            raise error(
                f"{where}: '{name}' is not an input of {source} (its inputs: {known})", hint=hint
            )
        _set_dims(by_name[name], dims, f"{where}.{name}", source)
    unresolved = []
    for name in runtime_inputs:
        info = info_from_type(by_name[name].type)
        if info is None:
            raise error(f"{source}: input '{name}' is not a tensor")
        if not info.is_static:
            unresolved.append(name)
    if unresolved:
        raise error(
            f"{source}: inputs with dynamic dims: "
            + ", ".join(f"'{name}' {_declared_dims(by_name[name])}" for name in unresolved),
            hint=_inputs_hint([by_name[name] for name in unresolved], where, bool(input_shapes)),
        )


def _inputs_hint(values: Sequence[onnx.ValueInfoProto], where: str, has_inputs: bool) -> str:
    """Where to set the dims, and the YAML to paste there: the lines `buildgen init` writes
    (inputs_yaml), under `inputs:` or, when the entry has one already, into it."""
    from buildgen.importer.inputs_yaml import DynamicInput, dynamic_input, inputs_lines

    items = [dynamic_input(v) or DynamicInput(v.name, None) for v in values]
    entry = where.rsplit(".", 1)[0]
    if has_inputs:
        lines = inputs_lines(items, "      ", "  ", header=False)
        return f"set it under {where}; add to it in the manifest:\n" + "\n".join(lines)
    lines = inputs_lines(items, "    ", "  ")
    return f"set it under {where}; add to {entry} in the manifest:\n" + "\n".join(lines)


def _declared_dims(value: onnx.ValueInfoProto) -> str:
    """The dims as the model spells them: [batch, 3, ?]."""
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return "(unknown rank)"
    dims = [
        str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
        for d in tensor.shape.dim
    ]
    return "[" + ", ".join(dims) + "]"


def _set_dims(value: onnx.ValueInfoProto, given: Sequence[int], where: str, source: Path) -> None:
    try:
        dims = tuple(operator.index(d) for d in given if not isinstance(d, bool))
    except TypeError:
        dims = ()
    info = info_from_type(value.type)
    # A zero dim is accepted only where the model itself fixes it to 0 (an empty input):
    # setting a dynamic dim to 0 is almost surely a mistake.
    fixed_zero = [d == 0 for d in info.shape] if info and info.shape else []
    zero_ok = [axis < len(fixed_zero) and fixed_zero[axis] for axis in range(len(dims))]
    if len(dims) != len(given) or any(
        d < 0 or (d == 0 and not ok) for d, ok in zip(dims, zero_ok, strict=True)
    ):
        raise error(f"{where}: dims must be positive integers, got {list(given)}")
    if info is None:
        raise error(f"{where}: input '{value.name}' of {source} is not a tensor")
    if info.shape is not None:
        if len(info.shape) != len(dims):
            raise error(
                f"{where}: input '{value.name}' has rank {len(info.shape)} in {source} "
                f"({info.describe()}) but {list(dims)} has rank {len(dims)}"
            )
        for axis, (fixed, wanted) in enumerate(zip(info.shape, dims, strict=True)):
            if fixed is not None and fixed != wanted:
                raise error(
                    f"{where}: input '{value.name}' dim {axis} is fixed to {fixed} in {source}, "
                    f"not {wanted}"
                )
    shape = value.type.tensor_type.shape
    shape.ClearField("dim")
    for d in dims:
        shape.dim.add().dim_value = d


def infer_model(
    model: onnx.ModelProto, nodes: Sequence[onnx.NodeProto], source: Path,
    outputs: Sequence[str] | None = None,
) -> dict[str, TensorInfo]:
    """ONNX shape inference (strict, with data propagation) over the model's `nodes`.

    `nodes` are the model's nodes in topological order, which ONNX inference relies on.
    `outputs`: the values to end the graph at, where `nodes` are only part of the model's.
    """
    from onnx import helper, shape_inference

    graph = model.graph
    small = [t for t in graph.initializer if _numel(t) <= _INFERENCE_DATA_LIMIT]
    hidden = [t for t in graph.initializer if _numel(t) > _INFERENCE_DATA_LIMIT]
    declared = {i.name for i in graph.input}
    inputs = dynamic_dims_as_unknown(graph.input) + [
        helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
        for t in hidden
        if t.name not in declared
    ]
    # Annotations of intermediate tensors are dropped: they often carry the export-time
    # batch size, which would conflict with the shapes the manifest sets.
    slim = helper.make_model(
        helper.make_graph(
            list(nodes),
            graph.name or "g",
            inputs,
            dynamic_dims_as_unknown(graph.output) if outputs is None
            else [helper.make_empty_tensor_value_info(name) for name in outputs],
            initializer=small,
        ),
        opset_imports=list(model.opset_import),
        ir_version=model.ir_version,
    )
    slim.functions.extend(model.functions)
    try:
        inferred = shape_inference.infer_shapes(
            slim, check_type=True, strict_mode=True, data_prop=True
        )
    except Exception as exc:  # InferenceError, ValidationError: the model is inconsistent
        raise error(f"{source}: ONNX shape inference failed: {exc}") from exc
    infos: dict[str, TensorInfo] = {}
    for value in (*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output):
        info = info_from_type(value.type)
        if info is not None:
            infos[value.name] = info
    return infos


def infer_node(
    node: onnx.NodeProto,
    opset_imports: Sequence[onnx.OperatorSetIdProto],
    inputs: Mapping[str, TensorInfo],
    constants: Mapping[str, np.ndarray],
) -> dict[str, TensorInfo]:
    """Output types of one node from its (now static) input types and constant inputs.

    Used where whole-model inference left a dim unknown because it depended on a value
    that only folding computed. Returns {} when ONNX has no inference for the op.
    """
    from onnx import defs, numpy_helper, shape_inference

    versions = {o.domain or "": o.version for o in opset_imports}
    domain = "" if node.domain == "ai.onnx" else node.domain
    try:
        schema = defs.get_schema(node.op_type, versions.get(domain, 1), domain)
    except (defs.SchemaError, TypeError):  # TypeError: a version beyond a C int (2**40)
        return {}
    types = {name: type_from_info(inputs[name]) for name in node.input if name in inputs}
    data = {
        name: numpy_helper.from_array(constants[name], name)
        for name in node.input
        if name in constants and constants[name].size <= _INFERENCE_DATA_LIMIT
    }
    try:
        result = shape_inference.infer_node_outputs(
            schema, node, types, data, None, list(opset_imports)
        )
    except Exception:  # an op without inference, or one ONNX cannot infer here
        return {}
    infos = {}
    for name, type_proto in result.items():
        info = info_from_type(type_proto)
        if info is not None:
            infos[name] = info
    return infos


def _numel(tensor: onnx.TensorProto) -> int:
    count = 1
    for d in tensor.dims:
        count *= d
    return count
