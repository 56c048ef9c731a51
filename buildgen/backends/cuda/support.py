"""Which nodes the `cuda` device backend runs, and why not the others.

Everything is float32 (Gather's indices int64; views and Concat move bytes of any dtype).
Inputs whose values shape the generated code (Slice starts, Reduce axes, Clip bounds)
must be constants, as on the c host.
"""

from __future__ import annotations

from buildgen.backends.c.ops.common import int_attr, ints_attr
from buildgen.backends.cuda.elementwise import BINARY, UNARY, is_elementwise
from buildgen.ir import DType, Graph, Node

VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})
REDUCE_OPS = {
    "ReduceSum": 0, "ReduceMean": 1, "ReduceMax": 2, "ReduceMin": 3, "ReduceProd": 4,
    "ReduceSumSquare": 5, "ReduceL2": 6, "ReduceL1": 7, "ReduceLogSumExp": 8,
}
OTHER = frozenset({
    "Gemm", "MatMul", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
    "Softmax", "LogSoftmax", "LayerNormalization", "Transpose", "Slice", "Concat", "Gather",
})
MAX_GRID_Z = 65535  # the GEMM kernel puts one batch per grid z index


def supported_ops() -> frozenset[str]:
    return frozenset(UNARY) | frozenset(BINARY) | VIEWS | OTHER | frozenset(REDUCE_OPS) | {
        "BatchNormalization"}


def _inputs(node: Node) -> list[str]:
    return [t for t in node.inputs if t]


def _float_only(node: Node, graph: Graph, names: list[str]) -> str | None:
    for name in names:
        dtype = graph.type_of(name).dtype
        if dtype is not DType.FLOAT32:
            return f"dtype {dtype.value} of '{name}' not supported by the cuda backend's {node.op}"
    return None


def _constants(node: Node, graph: Graph, indices: range) -> str | None:
    for i in indices:
        if i < len(node.inputs) and node.inputs[i] and not graph.is_weight(node.inputs[i]):
            return f"{node.op} with a run-time input {i} not supported (must be a constant)"
    return None


def reduce_axes(node: Node, graph: Graph, axes_value: tuple[int, ...] | None) -> tuple[int, ...]:
    rank = graph.type_of(node.inputs[0]).rank
    axes = axes_value if axes_value is not None else ints_attr(node, "axes")
    if not axes:
        return tuple(range(rank))
    return tuple(sorted(a % rank if rank else 0 for a in axes))


def _specific(node: Node, graph: Graph) -> str | None:
    op = node.op
    if op in ("Conv", "MaxPool", "AveragePool"):
        rank = graph.type_of(node.inputs[0]).rank
        if rank not in (3, 4):
            return f"{op} on {rank - 2}-D data not supported (1-D and 2-D only)"
        if op == "MaxPool" and len(node.outputs) > 1 and node.outputs[1]:
            return "MaxPool's Indices output not supported"
    if op == "Conv" and node.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID", "SAME_UPPER",
                                                                  "SAME_LOWER"):
        return "unknown auto_pad"
    if op == "MatMul":
        out = graph.type_of(node.outputs[0]).shape
        batches = 1
        for d in out[:-2]:
            batches *= d
        if batches > MAX_GRID_Z:
            return f"MatMul with {batches} batches (at most {MAX_GRID_Z})"
    if op in REDUCE_OPS:
        if node.attr("noop_with_empty_axes", 0) and len(_inputs(node)) < 2:
            return f"{op} with noop_with_empty_axes and no axes not supported"
        return _constants(node, graph, range(1, 2))
    if op == "LayerNormalization":
        if any(node.outputs[1:]):
            return "LayerNormalization's Mean/InvStdDev outputs not supported"
        axis = int_attr(node, "axis", -1)
        shape = graph.type_of(node.inputs[0]).shape
        n = 1
        for d in shape[axis % len(shape):]:
            n *= d
        for t in _inputs(node)[1:]:
            if graph.type_of(t).numel != n:
                return "LayerNormalization with broadcast scale/bias not supported"
    if op == "Slice":
        return _constants(node, graph, range(1, 5))
    if op == "Clip":
        return _constants(node, graph, range(1, 3))
    if op == "Gather":
        indices = graph.type_of(node.inputs[1]).dtype
        if indices is not DType.INT64:
            return f"Gather with {indices.value} indices not supported (int64 only)"
    if op == "Dropout" and len(node.outputs) > 1 and node.outputs[1]:
        return "Dropout's mask output not supported"
    return None


def decline_reason(node: Node, graph: Graph) -> str | None:
    if node.domain not in ("", "ai.onnx"):
        return f"op {node.domain}.{node.op} not implemented"
    if node.op not in supported_ops():
        return f"op {node.op} not implemented by the cuda backend"
    for name in (*_inputs(node), *(t for t in node.outputs if t)):
        if graph.type_of(name).numel == 0:
            return f"zero-size tensor '{name}' not supported by the cuda backend"
    data = [node.inputs[0]] if node.inputs and node.inputs[0] else []
    if node.op in VIEWS or node.op == "Concat":
        return None
    if node.op == "Gather" or node.op in REDUCE_OPS or node.op in ("Slice", "Clip"):
        # Their other inputs are indices, axes or bounds, not data.
        reason = _float_only(node, graph, [*data, node.outputs[0]])
    elif is_elementwise(node.op) or node.op in OTHER:
        reason = _float_only(node, graph, [*_inputs(node), node.outputs[0]])
    else:
        reason = None
    return reason or _specific(node, graph)
