"""Elementwise chains fused into one CUDA kernel each.

A chain is a run of elementwise nodes of one output shape where each reads a value made
earlier in the chain. The kernel loads every outside operand once per element (with ONNX
broadcasting; BatchNormalization's per-channel parameters broadcast along axis 1), keeps
the chain's values in registers, and stores only the ones needed after it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from buildgen.backends.c.ops.common import float_attr
from buildgen.codegen import cnames
from buildgen.ir import Graph, Node

if TYPE_CHECKING:
    import numpy as np

# Expression templates: {0}, {1}, ... are the operands (register names).
UNARY = {
    "Relu": "fmaxf({0}, 0.0f)", "Sigmoid": "(1.0f / (1.0f + expf(-{0})))",
    "Tanh": "tanhf({0})", "Exp": "expf({0})", "Log": "logf({0})", "Sqrt": "sqrtf({0})",
    "Abs": "fabsf({0})", "Neg": "(-{0})", "Erf": "erff({0})", "Reciprocal": "(1.0f / {0})",
    "Floor": "floorf({0})", "Ceil": "ceilf({0})", "Sin": "sinf({0})", "Cos": "cosf({0})",
    "Softplus": "log1pf(expf({0}))",
    "HardSwish": "({0} * fminf(fmaxf({0} / 6.0f + 0.5f, 0.0f), 1.0f))",
    "Round": "rintf({0})", "Sign": "(float)(({0} > 0.0f) - ({0} < 0.0f))",
    "LeakyRelu": "({0} >= 0.0f ? {0} : {alpha} * {0})",
    "Elu": "({0} >= 0.0f ? {0} : {alpha} * expm1f({0}))",
    "Selu": "({gamma} * ({0} > 0.0f ? {0} : {alpha} * expm1f({0})))",
    "HardSigmoid": "fminf(fmaxf({alpha} * {0} + {beta}, 0.0f), 1.0f)",
    "Gelu": "(0.5f * {0} * (1.0f + erff({0} * 0.70710678f)))",
    "Clip": "fminf(fmaxf({0}, {min}), {max})",
}
GELU_TANH = "(0.5f * {0} * (1.0f + tanhf(0.79788456f * ({0} + 0.044715f * {0} * {0} * {0}))))"
BINARY = {
    "Add": "({0} + {1})", "Sub": "({0} - {1})", "Mul": "({0} * {1})", "Div": "({0} / {1})",
    "Pow": "powf({0}, {1})", "Max": "fmaxf({0}, {1})", "Min": "fminf({0}, {1})",
    "PRelu": "({0} >= 0.0f ? {0} : {1} * {0})",
}
BATCH_NORM = "(({0} - {3}) * ({1} * rsqrtf({4} + {epsilon})) + {2})"
_DEFAULTS = {
    "LeakyRelu": {"alpha": 0.01}, "Elu": {"alpha": 1.0}, "HardSigmoid": {"alpha": 0.2, "beta": 0.5},
    "Selu": {"alpha": 1.6732632423543772, "gamma": 1.0507009873554805},
}


def is_elementwise(op: str) -> bool:
    return op in UNARY or op in BINARY or op == "BatchNormalization"


def float_literal(value: float) -> str:
    if math.isinf(value):
        return "INFINITY" if value > 0 else "(-INFINITY)"
    if math.isnan(value):
        return "NAN"
    return f"{value!r}f" if "e" in repr(value) or "." in repr(value) else f"{value!r}.0f"


def _operands(node: Node) -> list[str]:
    if node.op == "Clip":
        return [node.inputs[0]]  # min and max are inlined constants
    return [t for t in node.inputs if t]


def _expression(node: Node, graph: Graph, args: list[str], scalars: Mapping[str, float]) -> str:
    op = node.op
    if op == "BatchNormalization":
        eps = float_attr(node, "epsilon", 1e-5)
        return BATCH_NORM.format(*args, epsilon=float_literal(eps))
    if op == "Gelu" and node.attr("approximate", "none") == "tanh":
        return GELU_TANH.format(*args)
    if op in BINARY:
        return BINARY[op].format(*args)
    params = {k: float_attr(node, k, v) for k, v in _DEFAULTS.get(op, {}).items()}
    if op == "Clip":
        lo, hi = (node.inputs[i] if len(node.inputs) > i else "" for i in (1, 2))
        params["min"] = scalars[lo] if lo else float_attr(node, "min", -math.inf)
        params["max"] = scalars[hi] if hi else float_attr(node, "max", math.inf)
    return UNARY[op].format(*args, **{k: float_literal(v) for k, v in params.items()})


def _broadcast_index(graph: Graph, node: Node, tensor: str, out: tuple[int, ...]) -> str:
    """The index into `tensor` for output element i of a chain of shape `out`."""
    shape = graph.type_of(tensor).shape
    if node.op == "BatchNormalization" and tensor != node.inputs[0]:
        shape = (1, shape[0], *([1] * (len(out) - 2)))  # per channel (axis 1)
    if shape == out:
        return "i"
    if math.prod(shape) == 1:
        return "0"
    shape = (1,) * (len(out) - len(shape)) + tuple(shape)
    terms = []
    out_stride = in_stride = 1
    for d in range(len(out) - 1, -1, -1):
        if shape[d] != 1 and out[d] != 1:
            position = "i" if out_stride == 1 else f"(i / {out_stride})"
            if out_stride * out[d] != math.prod(out):  # not the outermost dim: wrap
                position = f"({position} % {out[d]})"
            terms.append(position if in_stride == 1 else f"{position} * {in_stride}")
        out_stride *= out[d]
        in_stride *= shape[d]
    return " + ".join(reversed(terms)) or "0"


@dataclass(frozen=True)
class FusedKernel:
    name: str
    definition: tuple[str, ...]  # the __global__ function
    inputs: tuple[str, ...]  # tensors passed as the a0, a1, ... parameters
    outputs: tuple[str, ...]  # tensors stored, the o0, o1, ... parameters
    numel: int


def fuse(
    graph: Graph, nodes: Sequence[Node], stored: Sequence[str], name: str,
    weights: Mapping[str, np.ndarray] | None,
) -> FusedKernel:
    """The kernel computing `nodes` (a chain in order) and storing the `stored` values."""
    out_shape = graph.type_of(nodes[-1].outputs[0]).shape
    numel = math.prod(out_shape)
    local: dict[str, str] = {}  # chain value -> its register
    inputs: list[str] = []
    loads: list[str] = []
    scalars: dict[str, float] = {}
    body: list[str] = []
    for node in nodes:
        if node.op == "Clip":
            for t in node.inputs[1:3]:
                if t:
                    scalars[t] = float(_weight(weights, t, node).reshape(-1)[0])
        args = []
        for t in _operands(node):
            if t in local:
                args.append(local[t])
                continue
            if graph.is_weight(t) and graph.type_of(t).numel == 1 and weights is not None:
                value = float(_weight(weights, t, node).reshape(-1)[0])
                if math.isfinite(value):
                    args.append(float_literal(value))
                    continue
            index = _broadcast_index(graph, node, t, out_shape)
            key = f"{t}@{index}"
            if key not in local:
                if t not in inputs:
                    inputs.append(t)
                reg = f"x{len(loads)}"
                loads.append(f"        const float {reg} = a{inputs.index(t)}[{index}];")
                local[key] = reg
            args.append(local[key])
        reg = f"v{len(body)}"
        body.append(f"        const float {reg} = {_expression(node, graph, args, scalars)};"
                    f" /* {cnames.comment(node.op + ' ' + repr(node.name))} */")
        local[node.outputs[0]] = reg
    params = [f"const float *__restrict__ a{i}" for i in range(len(inputs))]
    params += [f"float *__restrict__ o{j}" for j in range(len(stored))]
    stores = [f"        o{j}[i] = {local[t]};" for j, t in enumerate(stored)]
    shape = ", ".join(map(str, out_shape))
    doc = [f"/* {name}: {len(nodes)} elementwise node(s) over [{shape}]"]
    doc += [f" *   {cnames.comment(n.op + ' ' + repr(n.name))}" for n in nodes]
    definition = (
        *doc, " */",
        f"__global__ void {name}({', '.join(params)}, int64_t n)",
        "{",
        "    BG_FOR(i, n) {",
        *loads, *body, *stores,
        "    }",
        "}",
    )
    return FusedKernel(name, definition, tuple(inputs), tuple(stored), numel)


def _weight(weights: Mapping[str, np.ndarray] | None, name: str, node: Node) -> np.ndarray:
    from buildgen.errors import error

    if weights is None or name not in weights:
        raise error(f"cuda backend: node '{node.name}' needs the value of '{name}'")
    return weights[name]
