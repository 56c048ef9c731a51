"""Hard activations written out in elementary ops, imported as the one op they compute.

Paddle's exporter (PP-OCR, PP-LCNet), and many hand-written graphs, spell
    HardSwish(x)   = x * Clip(x + 3, 0, 6) / 6      (or Clip(...) / 6 * x, or * (1/6))
    HardSigmoid(x) = Clip(x + 3, 0, 6) / 6          (ONNX's HardSigmoid, alpha 1/6, beta 1/2)
and torch's exporter below opset 14 writes HardSwish as x * HardSigmoid(x, 1/6, 1/2). As four
ops, a backend that fuses activations into the Conv before them (oneDNN's post-ops, the c
host's epilogues) cannot: PP-OCRv4's detector ran 32 host regions of Add, Clip, Mul, Div
between its oneDNN convolutions. As one op, the chain fuses.

This runs after folding, when the 3, 0, 6 and 1/6 are known constants wherever the model
computed or stored them. Each rewritten chain's inner values must be read by the chain only
(not by another node, not a graph output); the last op's output keeps its name.

The results equal the written-out form to a rounding: x/6 + 1/2 clamped against
(x + 3) clamped / 6.

HardSwish entered ONNX at opset 14, and the graphs that write it out are often older (PP-OCR
exports at 11 and 12). The IR holds it at the graph's opset anyway: it has one version and
no attributes, so no backend can read it two ways.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx

from buildgen.importer.node_index import NodeIndex

_ONE_SIXTH = 1.0 / 6.0


def hard_activations(nodes: Sequence[onnx.NodeProto], constants: Mapping[str, np.ndarray],
                     outputs: Sequence[str]) -> list[onnx.NodeProto]:
    """`nodes` with each recognised chain replaced by its HardSigmoid or HardSwish node."""
    graph = _Graph(nodes, constants, outputs)
    replaced: dict[int, onnx.NodeProto | None] = {}  # id(node) -> its replacement, None: gone
    for node in nodes:
        if _is(node, "Clip") and id(node) not in replaced:
            chain = _hard_sigmoid_chain(graph, node)
            if chain is not None:
                x, used, last, swish = chain
                if any(id(n) in replaced for n in used):
                    continue
                for n in used:
                    replaced[id(n)] = None
                replaced[id(last)] = _make(x, last, swish)
    rewritten = [replaced.get(id(n), n) for n in nodes]
    kept = [n for n in rewritten if n is not None]
    return _swish_of_hard_sigmoid(kept, constants, outputs)


class _Graph(NodeIndex):
    def __init__(self, nodes: Sequence[onnx.NodeProto], constants: Mapping[str, np.ndarray],
                 outputs: Sequence[str]):
        super().__init__(nodes, outputs)
        self.constants = constants

    def scalar(self, name: str) -> float | None:
        array = self.constants.get(name)
        if array is None or array.size != 1 or array.dtype.kind != "f":
            return None
        return float(array.reshape(()))


def _is(node: onnx.NodeProto, op: str) -> bool:
    return node.op_type == op and node.domain in ("", "ai.onnx")


def _hard_sigmoid_chain(
    graph: _Graph, clip: onnx.NodeProto
) -> tuple[str, list[onnx.NodeProto], onnx.NodeProto, bool] | None:
    """From a Clip(x + 3, 0, 6): (x, the nodes replaced, the last of them, whether the chain
    is a HardSwish), or None."""
    if _clip_bounds(graph, clip) != (0.0, 6.0):
        return None
    add = graph.producer.get(clip.input[0])
    if add is None or not _is(add, "Add") or graph.only_reader(add.output[0]) is not clip:
        return None
    x = _other_operand(graph, add, 3.0)
    after = graph.only_reader(clip.output[0])
    if x is None or after is None:
        return None
    if _divides_by_six(graph, after):  # Clip / 6, then maybe * x
        then = graph.only_reader(after.output[0])
        if then is not None and _multiplies_by(then, after.output[0], x):
            return x, [add, clip, after], then, True
        return x, [add, clip], after, False
    if _multiplies_by(after, clip.output[0], x):  # x * Clip, then / 6
        then = graph.only_reader(after.output[0])
        if then is not None and _divides_by_six(graph, then):
            return x, [add, clip, after], then, True
    return None


def _clip_bounds(graph: _Graph, clip: onnx.NodeProto) -> tuple[float | None, float | None]:
    if len(clip.input) >= 3 and clip.input[1] and clip.input[2]:
        return graph.scalar(clip.input[1]), graph.scalar(clip.input[2])
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in clip.attribute}
    if len(clip.input) == 1 and "min" in attrs and "max" in attrs:  # opset < 11
        return float(attrs["min"]), float(attrs["max"])
    return None, None


def _other_operand(graph: _Graph, node: onnx.NodeProto, value: float) -> str | None:
    """The input of a two-input node that is not the scalar constant `value`."""
    a, b = node.input
    if graph.scalar(b) == value and a not in graph.constants:
        return a
    if graph.scalar(a) == value and b not in graph.constants:
        return b
    return None


def _divides_by_six(graph: _Graph, node: onnx.NodeProto) -> bool:
    if _is(node, "Div"):
        return graph.scalar(node.input[1]) == 6.0
    if _is(node, "Mul"):
        for operand in node.input:
            value = graph.scalar(operand)
            if value is not None and np.isclose(value, _ONE_SIXTH, rtol=1e-6, atol=0.0):
                return True
    return False


def _multiplies_by(node: onnx.NodeProto, value: str, x: str) -> bool:
    return _is(node, "Mul") and sorted(node.input) == sorted([value, x]) and value != x


def _make(x: str, last: onnx.NodeProto, swish: bool) -> onnx.NodeProto:
    if swish:
        return onnx.helper.make_node("HardSwish", [x], [last.output[0]], name=last.name)
    return onnx.helper.make_node("HardSigmoid", [x], [last.output[0]], name=last.name,
                                 alpha=_ONE_SIXTH, beta=0.5)


def _swish_of_hard_sigmoid(nodes: list[onnx.NodeProto], constants: Mapping[str, np.ndarray],
                           outputs: Sequence[str]) -> list[onnx.NodeProto]:
    """x * HardSigmoid(x, 1/6, 1/2) as HardSwish(x)."""
    graph = _Graph(nodes, constants, outputs)
    gone: set[int] = set()
    out: list[onnx.NodeProto] = []
    for node in nodes:
        if _is(node, "HardSigmoid") and _sixth_and_half(node):
            mul = graph.only_reader(node.output[0])
            if mul is not None and _multiplies_by(mul, node.output[0], node.input[0]):
                gone.add(id(mul))
                out.append(_make(node.input[0], mul, swish=True))
                continue
        if id(node) not in gone:
            out.append(node)
    return out


def _sixth_and_half(node: onnx.NodeProto) -> bool:
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return bool(np.isclose(attrs.get("alpha", 0.2), _ONE_SIXTH, rtol=1e-6)
                and np.isclose(attrs.get("beta", 0.5), 0.5))
