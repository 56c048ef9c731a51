"""Which ONNX LSTM, GRU and RNN nodes oneDNN's RNN primitives run, and how ONNX's gates map
onto oneDNN's.

oneDNN's cells compute what ONNX's default cells compute; only the order of the gates in
the weights and biases differs, and oneDNN takes one bias per gate (ONNX's Wb + Rb):

  LSTM  ONNX i, o, f, c            oneDNN i, f, c, o   (lstm)
  GRU   ONNX z, r, h               oneDNN u, r, o      (gru: linear_before_reset=0;
                                                        lbr_gru: =1, whose bias has a 4th
                                                        gate, Rbh, inside the reset product)
  RNN   ONNX i                     oneDNN the one gate (vanilla_rnn: Tanh, Relu, Sigmoid)

Weights must be constants: the module permutes their gates once at create, into oneDNN's
ldigo layout, and reorders them into the layout the primitive prefers. Declined, with the
reason the partitioner reports: run-time W, R or B, peepholes (P), clip, input_forget,
activations other than the defaults (RNN: one of Tanh, Relu, Sigmoid for every direction),
layout=1, a left-out Y, a run-time sequence_lens, and a constant one that does not give
every sequence all T steps (judged from the graph's constants; codegen checks again).
"""

from __future__ import annotations

import numpy as np

from buildgen.ir import Graph, Node

RECURRENT = frozenset(("LSTM", "GRU", "RNN"))
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
# oneDNN gate g reads ONNX gate GATE_MAP[op][g]
GATE_MAP = {"LSTM": (0, 2, 3, 1), "GRU": (0, 1, 2), "RNN": (0,)}
DEFAULT_ACTIVATIONS = {"LSTM": ("sigmoid", "tanh", "tanh"), "GRU": ("sigmoid", "tanh")}
RNN_ACTIVATIONS = {"tanh": "dnnl_eltwise_tanh", "relu": "dnnl_eltwise_relu",
                   "sigmoid": "dnnl_eltwise_logistic"}
DIRECTIONS = {"forward": "dnnl_unidirectional_left2right",
              "reverse": "dnnl_unidirectional_right2left",
              "bidirectional": "dnnl_bidirectional_concat"}
SEQUENCE_LENS = 4  # the input index of sequence_lens (int32)


def given(node: Node, index: int) -> str:
    return node.inputs[index] if index < len(node.inputs) else ""


def activations(node: Node, lower: bool = True) -> tuple[str, ...]:
    value = node.attr("activations", ())
    assert isinstance(value, tuple)
    return tuple(str(v).lower() if lower else str(v) for v in value)


def directions(node: Node) -> int:
    return 2 if node.attr("direction", "forward") == "bidirectional" else 1


def rnn_activation(node: Node) -> str:
    """The dnnl eltwise of a vanilla RNN (every direction uses one)."""
    return RNN_ACTIVATIONS[(activations(node) or ("tanh",))[0]]


def _activation_reason(node: Node) -> str | None:
    names = activations(node)
    if not names:
        return None
    count = directions(node)
    if node.op == "RNN":
        if len(set(names)) == 1 and names[0] in RNN_ACTIVATIONS and len(names) == count:
            return None
        return (f"RNN activations={list(activations(node, False))}: oneDNN's vanilla RNN "
                "runs one of "
                f"{'/'.join(sorted(RNN_ACTIVATIONS))}, the same in every direction")
    if names == DEFAULT_ACTIVATIONS[node.op] * count:
        return None
    return (f"{node.op} activations={list(activations(node, False))}: oneDNN's {node.op} cell "
            "has the default activations only")


def lengths_reason(node: Node, steps: int, lengths: np.ndarray) -> str | None:
    """Why a constant sequence_lens keeps oneDNN off the node (every sequence must run
    all T steps), or None."""
    values = sorted({int(v) for v in np.asarray(lengths).reshape(-1)})
    if values == [steps]:
        return None
    return f"{node.op} sequence_lens {values} (oneDNN runs every sequence for all {steps} steps)"


def _lengths_reason(node: Node, graph: Graph, lens: str) -> str | None:
    value = graph.constant(lens) if lens else None
    if value is None:  # no sequence_lens, or the graph carries no constants: codegen checks
        return None
    return lengths_reason(node, graph.type_of(node.inputs[0]).shape[0], value)


def rnn_reason(node: Node, graph: Graph) -> str | None:
    """decline_reason of an LSTM, GRU or RNN node (float32 is checked by the caller)."""
    op = node.op
    if node.attr("layout", 0) != 0:
        return f"{op} layout=1 (batch first): oneDNN's RNN primitives read [T, batch, ...]"
    direction = node.attr("direction", "forward")
    if direction not in DIRECTIONS:
        return f"{op} direction={direction} is not an ONNX direction"
    if node.has_attr("clip"):
        return f"{op} clip: oneDNN's RNN cells do not clip"
    if op == "LSTM" and node.attr("input_forget", 0) != 0:
        return "LSTM input_forget=1: oneDNN's LSTM cell has separate input and forget gates"
    if op == "GRU" and node.attr("linear_before_reset", 0) not in (0, 1):
        return "GRU linear_before_reset must be 0 or 1"
    reason = _activation_reason(node)
    if reason:
        return reason
    if op == "LSTM" and given(node, 7):
        return "LSTM with peepholes (P): oneDNN's LSTM with peepholes is not used here"
    for index, what in ((1, "W"), (2, "R"), (3, "B")):
        name = given(node, index)
        if name and not graph.is_weight(name):
            return f"{op} with run-time {what} (onednn permutes constant gate weights once)"
    lens = given(node, SEQUENCE_LENS)
    if lens and not graph.is_weight(lens):
        return (f"{op} with a run-time sequence_lens: oneDNN runs every sequence for all "
                "T steps")
    reason = _lengths_reason(node, graph, lens)
    if reason:
        return reason
    if not node.outputs or not node.outputs[0]:
        return f"{op} with Y left out (oneDNN writes Y; the c host skips it)"
    if graph.type_of(node.inputs[0]).rank != 3:
        return f"{op} X of rank {graph.type_of(node.inputs[0]).rank}"
    if any(d == 0 for d in graph.type_of(node.inputs[0]).shape):
        return f"{op} of an empty sequence"
    return None
