"""The fused epilogue of an openblas kernel: one loop nest over the GEMM's output that applies
the anchor's bias and every chain step to each element while it is in a register.

Each term updates `v` with a C expression; operands are arrays read at their broadcast index
(stride 0 along broadcast dims), so one loop nest serves a per-column bias, a per-channel
BatchNormalization and a full-size residual alike. The loops are coalesced and their bounds
are constants, so the compiler vectorizes the innermost one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from buildgen.backends.c.cwriter import (
    Code,
    broadcast_strides,
    coalesce,
    contiguous_strides,
    float_literal,
    linear,
)
from buildgen.backends.cpu_common.carrays import StaticArray
from buildgen.backends.cpu_common.steps import Act, Affine, Binary, Gelu, Step
from buildgen.backends.cpu_common.values import act_params, bn_scale_shift, scalar_operand
from buildgen.ir import Graph


@dataclass(frozen=True)
class Operand:
    name: str  # the C array it reads (a kernel parameter or a static constant)
    strides: tuple[int, ...]  # element strides over the output's dims; 0 = broadcast


@dataclass(frozen=True)
class Term:
    """v = expression, where {0}, {1}, ... stand for the operands' elements."""

    expression: str
    operands: tuple[Operand, ...] = ()
    what: str = ""  # for the comment above the loop


def _lit(value: float) -> str:
    text = float_literal(value)
    return f"({text})" if text.startswith("-") else text


def _clamp01(x: str) -> str:
    return f"({x} < 0.0f ? 0.0f : ({x} > 1.0f ? 1.0f : {x}))"


_GELU_ERF = "0.5f * v * (1.0f + erff(v * 0.70710678118654752f))"
_SOFTPLUS = "(v > 0.0f ? v + log1pf(expf(-v)) : log1pf(expf(v)))"  # exact and no overflow


def act_expression(step: Act, weights: Mapping[str, np.ndarray] | None) -> str:
    alpha, beta = act_params(step.node, weights)
    a, b = _lit(alpha), _lit(beta)
    op = step.node.op
    if op == "Gelu" and step.node.attr("approximate", "none") == "tanh":
        return "0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))"
    return {
        "Relu": "v > 0.0f ? v : 0.0f",
        "LeakyRelu": f"v >= 0.0f ? v : {a} * v",
        "Clip": f"v < {a} ? {a} : (v > {b} ? {b} : v)",
        "Sigmoid": "1.0f / (1.0f + expf(-v))",
        "Tanh": "tanhf(v)",
        "HardSigmoid": _clamp01(f"({a} * v + {b})"),
        "HardSwish": "v * " + _clamp01("(v * (1.0f / 6.0f) + 0.5f)"),
        "Elu": f"v >= 0.0f ? v : {a} * (expf(v) - 1.0f)",
        "Softplus": _SOFTPLUS,
        "Gelu": _GELU_ERF,
        "Mish": f"v * tanhf{_SOFTPLUS}",
        "Abs": "fabsf(v)",
        "Neg": "-v",
        "Sqrt": "sqrtf(v)",
        "Exp": "expf(v)",
    }[op]


_BINARY = {"Add": "v + {0}", "Sub": "v - {0}", "Mul": "v * {0}", "Div": "v / {0}"}


def channel_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Strides reading a [C] array along dim 1 of `shape` (N, C, ...)."""
    return tuple(1 if d == 1 else 0 for d in range(len(shape)))


def step_terms(
    steps: Sequence[Step],
    shape: tuple[int, ...],
    graph: Graph,
    weights: Mapping[str, np.ndarray] | None,
    names: Mapping[str, str],
    prefix: str,
) -> tuple[list[Term], list[StaticArray]]:
    """Terms for `steps` on an output of `shape`; `names` maps tensors to C parameters.
    BatchNormalization becomes two static arrays (scale, shift) named after `prefix`."""
    terms: list[Term] = []
    arrays: list[StaticArray] = []
    for step in steps:
        what = f"{step.node.op} '{step.node.name}'"
        if isinstance(step, Act):
            terms.append(Term(act_expression(step, weights), what=what))
        elif isinstance(step, Gelu):
            terms.append(Term(_GELU_ERF, what=f"GELU (erf) ending at '{step.node.name}'"))
        elif isinstance(step, Binary):
            value = scalar_operand(step, graph, weights)
            template = _BINARY[step.op]
            if value is not None:
                terms.append(Term(template.format(_lit(value)), what=what))
            else:
                strides = broadcast_strides(graph.type_of(step.other).shape, shape)
                operand = Operand(names[step.other], strides)
                terms.append(Term(template, (operand,), what))
        elif isinstance(step, Affine):
            scale, shift = bn_scale_shift(step.node, weights)
            base = f"{prefix}_bn{len(arrays) // 2}"
            arrays += [
                StaticArray(f"{base}_scale", tuple(map(float, scale)), f"{what}: scale"),
                StaticArray(f"{base}_shift", tuple(map(float, shift)), f"{what}: shift"),
            ]
            strides = channel_strides(shape)
            operands = (Operand(f"{base}_scale", strides), Operand(f"{base}_shift", strides))
            terms.append(Term("v * {0} + {1}", operands, what))
    return terms, arrays


def epilogue_loop(
    code: Code, shape: tuple[int, ...], source: str, dest: str, terms: Sequence[Term]
) -> None:
    """`dest[i] = terms(source[i])` over a contiguous tensor of `shape` (source may be dest)."""
    if not terms and source == dest:
        return
    operands = [o for t in terms for o in t.operands]
    own = contiguous_strides(shape)
    extents, strides = coalesce(shape, [own, *(o.strides for o in operands)])
    code.line("/* epilogue: " + "; ".join(t.what or t.expression for t in terms) + " */")
    with code.loops(extents) as counters:
        index = linear(counters, strides[0])
        code.line(f"float v = {source}[{index}];")
        position = 1
        for term in terms:
            refs = []
            for operand in term.operands:
                refs.append(f"{operand.name}[{linear(counters, strides[position])}]")
                position += 1
            code.line(f"v = {term.expression.format(*refs)};")
        code.line(f"{dest}[{index}] = v;")
