"""An LSTM, GRU or RNN group of a oneDNN region: the bg_dnnl_rnn_spec of bg_onednn_rnn.h.

The generator decides the cell, its gate order and its bias here, from the constants: the
bias is ONNX's Wb + Rb per gate in oneDNN's order (an lbr_gru keeps Rbh as a fourth gate),
written as a static array; W and R stay in the weights file and are permuted at create."""

from __future__ import annotations

import numpy as np

from buildgen.backends.cpu_common.groups import Group
from buildgen.backends.cpu_common.values import weight
from buildgen.backends.onednn.blocks import Context, dims, spec
from buildgen.backends.onednn.rnn import (
    DIRECTIONS,
    GATE_MAP,
    GATES,
    SEQUENCE_LENS,
    directions,
    given,
    lengths_reason,
    rnn_activation,
)
from buildgen.errors import error
from buildgen.ir import Node


def _cell(node: Node) -> str:
    if node.op == "LSTM":
        return "BG_DNNL_LSTM"
    if node.op == "GRU":
        return "BG_DNNL_LBR_GRU" if node.attr("linear_before_reset", 0) == 1 else "BG_DNNL_GRU"
    return "BG_DNNL_VANILLA_RNN"


def _bias(ctx: Context, node: Node, count: int, hidden: int) -> np.ndarray:
    """[D, bias gates, H] in oneDNN's order."""
    gates = GATES[node.op]
    b = given(node, 3)
    both = (weight(ctx.weights, node, b).reshape(count, 2, gates, hidden) if b
            else np.zeros((count, 2, gates, hidden), np.float32))
    order = list(GATE_MAP[node.op])
    wb, rb = both[:, 0, order], both[:, 1, order]
    if _cell(node) == "BG_DNNL_LBR_GRU":  # u, r, o with Wbh only, then u' = Rbh
        out = np.concatenate([wb + rb, rb[:, 2:3]], axis=1)
        out[:, 2] = wb[:, 2]
        return out
    return wb + rb


def _check_lengths(ctx: Context, node: Node, steps: int) -> None:
    lens = given(node, SEQUENCE_LENS)
    if not lens:
        return
    if ctx.weights is None or lens not in ctx.weights:
        raise error(f"{node.op} '{node.name}': its sequence_lens '{lens}' is needed at codegen, "
                    "but no weights were given")
    reason = lengths_reason(node, steps, ctx.weights[lens])
    if reason:
        raise error(f"onednn backend cannot run node '{node.name}' ({node.op}): {reason}",
                    hint=f"pin '{node.name}' to c in the manifest; the c host masks each "
                    "sequence's steps")


def _state(ctx: Context, node: Node, index: int) -> tuple[str, str]:
    """(tensor, weights offset) of an optional initial state; -1 where not that kind."""
    name = given(node, index)
    if not name:
        return "-1", "-1"
    if ctx.graph.is_weight(name):
        return "-1", str(ctx.graph.weight(name).offset)
    return ctx.layout.enum(name), "-1"


def _output(ctx: Context, node: Node, index: int) -> str:
    name = node.outputs[index] if index < len(node.outputs) else ""
    return ctx.layout.enum(name) if name else "-1"


def rnn_block(ctx: Context, group: Group, node: Node) -> tuple[list[str], str, list[str]]:
    graph = ctx.graph
    steps, batch, size = graph.type_of(node.inputs[0]).shape
    count = directions(node)
    hidden = graph.type_of(node.inputs[2]).shape[-1]
    _check_lengths(ctx, node, steps)
    bias = _bias(ctx, node, count, hidden)
    h0, h0_offset = _state(ctx, node, 5)
    c0, c0_offset = _state(ctx, node, 6) if node.op == "LSTM" else ("-1", "-1")
    gate_map = GATE_MAP[node.op]
    what = f"{node.op} '{node.name}': Wb + Rb in oneDNN's gate order"
    fields = [
        ("cell", _cell(node)),
        ("activation", rnn_activation(node) if node.op == "RNN" else "0"),
        ("direction", DIRECTIONS[str(node.attr("direction", "forward"))]),
        ("steps", str(steps)), ("batch", str(batch)), ("input", str(size)),
        ("hidden", str(hidden)), ("directions", str(count)), ("gates", str(GATES[node.op])),
        ("x", ctx.layout.enum(node.inputs[0])), ("y", ctx.layout.enum(group.output)),
        ("h0", h0), ("c0", c0), ("hn", _output(ctx, node, 1)),
        ("cn", _output(ctx, node, 2) if node.op == "LSTM" else "-1"),
        ("h0_offset", h0_offset), ("c0_offset", c0_offset),
        ("weights", str(graph.weight(node.inputs[1]).offset)),
        ("recurrence", str(graph.weight(node.inputs[2]).offset)),
        ("gate_map", dims(gate_map)),
        ("bias", ctx.array("bias", bias.reshape(-1), what)),
        ("bias_gates", str(bias.shape[1])),
    ]
    order = "ONNX gates " + ", ".join(str(g) for g in gate_map) + " as oneDNN's"
    return ([*spec("bg_dnnl_rnn_spec", fields)], "bg_dnnl_rnn(m, r, &spec",
            [f"{_cell(node)}: {order}, weights permuted at create"])
