"""Epilogue steps: the elementwise ops a library backend fuses after an anchor op.

After a Conv, MatMul or Gemm, a chain of these runs on the anchor's output before it is
written: an activation (Relu, Clip, ...), a binary op with a weight or with another tensor
(a bias, a scale, a residual), or an inference BatchNormalization (a per-channel affine).
Each step keeps the chain's shape: the chain's tensor is never broadcast, only the other
operand. Whether a node is such a step only depends on the graph; the constants it uses
(Clip's bounds, a BatchNormalization's scale and shift) are read at codegen by values.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from buildgen.backends.cpu_common.gelu import GeluMatch
from buildgen.backends.cpu_common.shuffle import ShuffleMatch
from buildgen.backends.cpu_common.swish import SwishMatch
from buildgen.ir import DType, Graph, Node

# Activations every library backend fuses, with what they compute (for the docs).
ACTIVATIONS: dict[str, str] = {
    "Relu": "max(x, 0)",
    "LeakyRelu": "x >= 0 ? x : alpha * x",
    "Clip": "min(max(x, lo), hi)",
    "Sigmoid": "1 / (1 + exp(-x))",
    "Tanh": "tanh(x)",
    "HardSigmoid": "max(0, min(1, alpha * x + beta))",
    "HardSwish": "x * max(0, min(1, x / 6 + 1/2))",
    "Elu": "x >= 0 ? x : alpha * (exp(x) - 1)",
    "Softplus": "log(1 + exp(x))",
    "Gelu": "x * Phi(x) (erf, or tanh with approximate='tanh')",
    "Mish": "x * tanh(log(1 + exp(x)))",
    "Abs": "|x|",
    "Neg": "-x",
    "Sqrt": "sqrt(x)",
    "Exp": "exp(x)",
}
BINARY_OPS = ("Add", "Sub", "Mul", "Div")
COMMUTATIVE = ("Add", "Mul")
EPILOGUE_OPS = frozenset((*ACTIVATIONS, *BINARY_OPS, "BatchNormalization"))


@dataclass(frozen=True)
class Act:
    """y = f(x) for an op of ACTIVATIONS."""

    node: Node


@dataclass(frozen=True)
class Binary:
    """y = x (op) other, or other (op) x for Add and Mul; `other` is broadcast to x's shape."""

    node: Node
    other: str  # a weight or a tensor computed before the chain

    @property
    def op(self) -> str:
        return self.node.op


@dataclass(frozen=True)
class Affine:
    """BatchNormalization in inference mode: y = x * scale[c] + shift[c] along dim 1."""

    node: Node


@dataclass(frozen=True)
class Gelu:
    """The five nodes of an exported erf GELU (see gelu.py), as one activation."""

    match: GeluMatch

    @property
    def node(self) -> Node:
        """The node that writes its output (what a comment names)."""
        return self.match.nodes[-1]


@dataclass(frozen=True)
class Swish:
    """The Sigmoid and Mul of an exported SiLU, x * sigmoid(x) (see swish.py), as one
    activation."""

    match: SwishMatch

    @property
    def node(self) -> Node:
        """The node that writes its output (what a comment names)."""
        return self.match.nodes[-1]


@dataclass(frozen=True)
class Shuffle:
    """The Reshape, Transpose and Reshape of a channel shuffle (see shuffle.py), as one step
    that always runs as a group of its own: it moves values between channels, so nothing
    fuses into it or after it."""

    match: ShuffleMatch

    @property
    def node(self) -> Node:
        """The node that writes its output (what a comment names)."""
        return self.match.nodes[-1]


Step = Act | Binary | Affine | Gelu | Swish | Shuffle


def step_nodes(step: Step) -> tuple[Node, ...]:
    return step.match.nodes if isinstance(step, (Gelu, Swish, Shuffle)) else (step.node,)


def _used(graph: Graph, name: str) -> bool:
    return bool(name) and (bool(graph.consumers(name)) or name in graph.output_names)


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    if len(shape) > len(target):
        return False
    lead = len(target) - len(shape)
    return all(d in (1, target[lead + i]) for i, d in enumerate(shape))


def _float_reason(graph: Graph, node: Node) -> str | None:
    for name in (*node.inputs, *node.outputs):
        if name and graph.type_of(name).dtype != DType.FLOAT32:
            return f"{node.op} tensor '{name}' is {graph.type_of(name).dtype.value}, not float32"
    return None


def _act_reason(node: Node, graph: Graph) -> str | None:
    if node.op == "Clip":
        for bound in node.inputs[1:3]:
            if bound and not (graph.is_weight(bound) and graph.type_of(bound).numel == 1):
                return "Clip with a bound that is not a constant scalar"
    if node.op == "Gelu" and node.attr("approximate", "none") not in ("none", "tanh"):
        return f"Gelu approximate={node.attr('approximate')!r}"
    return None


def step_for(node: Node, graph: Graph, chain: str) -> Step | str:
    """`node` as an epilogue step reading the chain's tensor `chain`, or why it is not one."""
    if node.domain not in ("", "ai.onnx"):
        return f"op {node.domain}.{node.op} is not an epilogue op"
    if node.op not in EPILOGUE_OPS:
        return f"{node.op} is not an elementwise epilogue op"
    if not node.outputs or chain not in node.inputs:
        return f"{node.op} does not read '{chain}'"
    reason = _float_reason(graph, node)
    if reason:
        return reason
    if any(_used(graph, extra) for extra in node.outputs[1:]):
        return f"{node.op} with its extra outputs used"
    if graph.type_of(node.outputs[0]).shape != graph.type_of(chain).shape:
        return f"{node.op} broadcasts '{chain}' to a larger shape"
    if node.op in ACTIVATIONS:
        if node.inputs[0] != chain:
            return f"{node.op} reads '{chain}' as a parameter"
        return _act_reason(node, graph) or Act(node)
    if node.op == "BatchNormalization":
        return _affine_reason(node, graph, chain) or Affine(node)
    return _binary(node, graph, chain)


def _binary(node: Node, graph: Graph, chain: str) -> Step | str:
    if len(node.inputs) != 2 or node.inputs[0] == node.inputs[1]:
        return f"{node.op} of a tensor with itself"
    index = node.inputs.index(chain)
    if index == 1 and node.op not in COMMUTATIVE:
        return f"{node.op} with the chain's tensor as its right operand"
    other = node.inputs[1 - index]
    if not _broadcasts_to(graph.type_of(other).shape, graph.type_of(chain).shape):
        return f"{node.op} operand '{other}' does not broadcast to the chain's shape"
    return Binary(node, other)


def _affine_reason(node: Node, graph: Graph, chain: str) -> str | None:
    if node.inputs[0] != chain:
        return "BatchNormalization reads the chain's tensor as a parameter"
    if node.attr("training_mode", 0) != 0:
        return "BatchNormalization in training mode"
    shape = graph.type_of(chain).shape
    if len(shape) < 2 or len(node.inputs) != 5:
        return "BatchNormalization needs a rank >= 2 input and its four parameters"
    for name in node.inputs[1:]:
        if not graph.is_weight(name):
            return f"BatchNormalization parameter '{name}' is not a constant"
        if graph.type_of(name).shape != (shape[1],):
            return f"BatchNormalization parameter '{name}' is not of shape [{shape[1]}]"
    return None


def chain_candidates(node: Node, graph: Graph) -> list[str]:
    """Inputs of `node` that a fused chain may carry into it: computed by a node, read by
    `node` alone (once), and not a graph output, so fusing never hides a needed tensor."""
    found = []
    for name in dict.fromkeys(n for n in node.inputs if n):
        if graph.is_weight(name) or graph.producer(name) is None:
            continue
        if name in graph.output_names:
            continue
        readers = graph.consumers(name)
        if len(readers) == 1 and readers[0].name == node.name:
            found.append(name)
    return found
