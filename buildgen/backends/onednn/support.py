"""What the onednn backend runs: Conv (1-D to 3-D), MatMul and Gemm with the elementwise
chain after them fused as post-ops (bias, scale, residual sum, BatchNormalization, eltwise),
and on their own MaxPool, AveragePool, the global pools (and ReduceMean over every spatial
axis, kept: a squeeze-excite block's), Softmax, LogSoftmax,
LayerNormalization, LRN (across channels, odd sizes), Concat of run-time tensors, Split (and the
elementwise steps after it or a pooling, as groups of their own, and a binary step of
two run-time tensors after a Conv whose output is read twice), the Resize / Upsample
variants oneDNN's resampling reproduces (resample.py) and LSTM, GRU and RNN with constant
weights and oneDNN's cells (rnn.py). Everything else declines, with the reason the
partitioner reports."""

from __future__ import annotations

from collections.abc import Callable
from math import prod

from buildgen.backends.cpu_common.groups import ChainRules
from buildgen.backends.onednn.resample import resample_reason
from buildgen.backends.onednn.rnn import RECURRENT, SEQUENCE_LENS, rnn_reason
from buildgen.ir import DType, Graph, Node

MAX_DIMS = 12  # DNNL_MAX_NDIMS
POOLS = frozenset(("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"))
NORMS = frozenset(("Softmax", "LogSoftmax", "LayerNormalization"))
FUSABLE = frozenset(("Conv", "MatMul", "Gemm"))
RESAMPLES = frozenset(("Resize", "Upsample"))


def _float_reason(node: Node, graph: Graph) -> str | None:
    # Resize's roi / scales / sizes and Split's sizes are constants read at codegen (Split's
    # from its outputs' shapes), of any type; ReduceMean's axes are not data at all (it is
    # judged by its shapes); an RNN's sequence_lens is int32.
    names = [*node.inputs, *node.outputs]
    if node.op in RESAMPLES or node.op in ("Split", "ReduceMean"):
        names = [node.inputs[0], *node.outputs]
    elif node.op in RECURRENT and len(node.inputs) > SEQUENCE_LENS:
        names[SEQUENCE_LENS] = ""
    for name in names:
        if name and graph.type_of(name).dtype != DType.FLOAT32:
            return f"{node.op} on {graph.type_of(name).dtype.value} (onednn runs float32 here)"
    return None


def _extra_outputs_reason(node: Node, graph: Graph) -> str | None:
    for name in node.outputs[1:]:
        if name and (graph.consumers(name) or name in graph.output_names):
            return f"{node.op} with its output '{name}' used"
    return None


def _rank(graph: Graph, name: str) -> int:
    return graph.type_of(name).rank


def _conv(node: Node, graph: Graph) -> str | None:
    if not 3 <= _rank(graph, node.inputs[0]) <= 5:
        return f"Conv of rank {_rank(graph, node.inputs[0])} (onednn runs 1-D to 3-D)"
    for index, what in ((1, "weights"), (2, "bias")):
        name = node.inputs[index] if index < len(node.inputs) else ""
        if name and not graph.is_weight(name):
            return f"Conv with run-time {what} (onednn reorders constant weights once)"
    return None


def _matmul(node: Node, graph: Graph) -> str | None:
    a, b = node.inputs[:2]
    if graph.is_weight(a):
        return "MatMul of a constant left operand"
    if _rank(graph, b) == 1:
        return "MatMul with a 1-D right operand (a matrix-vector product) is left to the host"
    if max(_rank(graph, a), _rank(graph, b), 2) > MAX_DIMS:
        return f"MatMul of more than {MAX_DIMS} dims"
    return None


def _gemm(node: Node, graph: Graph) -> str | None:
    if graph.is_weight(node.inputs[0]):
        return "Gemm of a constant A"
    c = node.inputs[2] if len(node.inputs) > 2 else ""
    if c and not graph.is_weight(c) and node.attr("beta", 1.0) != 1.0:
        return "Gemm with a run-time C and beta != 1"
    if c and _rank(graph, c) > 2:
        return "Gemm C of rank > 2"
    return None


def _pool(node: Node, graph: Graph) -> str | None:
    if not 3 <= _rank(graph, node.inputs[0]) <= 5:
        return f"{node.op} of rank {_rank(graph, node.inputs[0])} (onednn runs 1-D to 3-D)"
    ceil = node.attr("ceil_mode", 0) == 1
    if node.op == "AveragePool" and ceil and node.attr("count_include_pad", 0) == 1:
        return "AveragePool with ceil_mode and count_include_pad"
    return _extra_outputs_reason(node, graph)


def _reduce_mean(node: Node, graph: Graph) -> str | None:
    """ReduceMean over every spatial axis with the dims kept is a GlobalAveragePool: a
    squeeze-excite block's (PP-LCNet, MobileNetV3, EfficientNet), between two oneDNN
    convolutions. Judged by the shapes, which say it exactly: batch and channels kept,
    every spatial dim 1 (a reduced axis of size 1 changes nothing), whatever the axes
    (an attribute, or from opset 18 an input whose value codegen does not have)."""
    rank = _rank(graph, node.inputs[0])
    if not 4 <= rank <= 5:
        # Over the last axis of [N, T, C] it is a written-out LayerNorm's mean (SVTR's, in
        # PP-OCRv4's recogniser), whose other steps the host runs: taking it alone would
        # put two region boundaries around every such mean.
        return f"ReduceMean of rank {rank} (onednn takes a 2-D or 3-D global average pool)"
    x = graph.type_of(node.inputs[0]).shape
    y = graph.type_of(node.outputs[0]).shape
    if len(y) != rank:
        return "ReduceMean without keepdims (onednn runs it as a global average pool)"
    if tuple(y[:2]) != tuple(x[:2]) or any(d != 1 for d in y[2:]):
        return (f"ReduceMean from {list(x)} to {list(y)} (onednn runs the mean over the "
                "spatial axes only, as a global average pool)")
    return None


def _softmax(node: Node, graph: Graph) -> str | None:
    rank = _rank(graph, node.inputs[0])
    if rank > MAX_DIMS:
        return f"{node.op} of more than {MAX_DIMS} dims"
    axis = node.attr("axis", -1 if graph.opset >= 13 else 1)
    assert isinstance(axis, int)
    inner = prod(graph.type_of(node.inputs[0]).shape[axis % rank + 1:]) if rank else 1
    if graph.opset >= 13 and inner > 1:
        # oneDNN's softmax over an axis that is not the innermost, in the plain layout,
        # runs its reference code: YOLOv8's DFL head ([1, 16, 4, 2100], axis 1) took 17 ms
        # there and 0.33 ms on the c host; [1, 64, 16, 16] over its channels 2.5 ms.
        return (f"{node.op} over axis {axis} with {inner} elements after it (oneDNN's "
                "softmax is fast over the innermost axis only)")
    return None


def _layer_norm(node: Node, graph: Graph) -> str | None:
    for name in node.inputs[1:3]:
        if name and not graph.is_weight(name):
            return f"LayerNormalization with run-time parameter '{name}'"
    axis = node.attr("axis", -1)
    assert isinstance(axis, int)
    rank = _rank(graph, node.inputs[0])
    scale = graph.type_of(node.inputs[1]).shape
    normalized = graph.type_of(node.inputs[0]).shape[axis % rank :]
    if scale != normalized:
        return f"LayerNormalization scale of shape {list(scale)} (onednn wants {list(normalized)})"
    return _extra_outputs_reason(node, graph)


def _lrn(node: Node, graph: Graph) -> str | None:
    if not 3 <= _rank(graph, node.inputs[0]) <= 5:
        return f"LRN of rank {_rank(graph, node.inputs[0])} (onednn runs 1-D to 3-D)"
    size = node.attr("size", 0)
    assert isinstance(size, int)
    if size % 2 == 0:
        return (f"LRN size={size} (even): oneDNN's window is symmetric, ONNX's reaches one "
                "channel further up")
    return None


def _split(node: Node, graph: Graph) -> str | None:
    rank = _rank(graph, node.inputs[0])
    if not 1 <= rank <= MAX_DIMS:
        return f"Split of rank {rank}"
    if any(not name for name in node.outputs):
        return "Split with an output left unnamed"
    if any(graph.type_of(name).numel == 0 for name in node.outputs):
        return "Split with an empty output"
    return None


# A concat's inputs, its output and a scratchpad are one primitive's arguments
# (BG_DNNL_MAX_ARGS in bg_onednn.h).
MAX_CONCAT_INPUTS = 32


def _concat(node: Node, graph: Graph) -> str | None:
    inputs = [n for n in node.inputs if n]
    if len(inputs) > MAX_CONCAT_INPUTS:
        return f"Concat of {len(inputs)} inputs (onednn takes up to {MAX_CONCAT_INPUTS})"
    if any(graph.is_weight(n) for n in inputs):
        return "Concat with a constant input (left to the host, which reads it in place)"
    if not 1 <= _rank(graph, node.outputs[0]) <= MAX_DIMS:
        return f"Concat of rank {_rank(graph, node.outputs[0])}"
    if any(graph.type_of(n).numel == 0 for n in inputs):
        return "Concat with an empty input"
    return None


_CHECKS: dict[str, Callable[[Node, Graph], str | None]] = {
    "Conv": _conv,
    "MatMul": _matmul,
    "Gemm": _gemm,
    **{op: _pool for op in POOLS},
    "ReduceMean": _reduce_mean,
    "Softmax": _softmax,
    "LogSoftmax": _softmax,
    "LayerNormalization": _layer_norm,
    "LRN": _lrn,
    "Concat": _concat,
    "Split": _split,
    **{op: resample_reason for op in RESAMPLES},
    **{op: rnn_reason for op in RECURRENT},
}


def anchor_reason(node: Node, graph: Graph) -> str | None:
    if node.domain not in ("", "ai.onnx"):
        return f"op {node.domain}.{node.op} is not supported by onednn"
    check = _CHECKS.get(node.op)
    if check is None:
        return f"no onednn pattern covers {node.op}"
    return _float_reason(node, graph) or check(node, graph)


RULES = ChainRules(
    kind="onednn",
    anchors=frozenset(_CHECKS),
    fusable=FUSABLE,
    anchor_reason=anchor_reason,
    gelu=True,  # oneDNN's gelu_erf eltwise, as a post-op or on its own
    swish=True,  # oneDNN's swish eltwise (alpha 1), likewise
    shuffle=True,  # oneDNN's shuffle primitive, in the layout of its input
    # as eltwise and binary primitives, in the layout the anchor wrote
    steps_after=frozenset(("Concat", "MaxPool", "AveragePool")),
    # After a Conv whose output is read twice (a squeeze-excite's x, which its pooling reads
    # too), only a binary step of two run-time tensors starts a group: a binary primitive.
    # An eltwise one with such a tensor as a post-op runs oneDNN's reference code (PP-OCRv4's
    # recogniser: 6 ms a run in five of them).
    binary_after=frozenset(("Conv",)),
)
