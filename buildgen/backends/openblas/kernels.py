"""One static C function per group: the anchor's cblas_sgemm call(s), then the epilogue.

    MatMul  one sgemm when the right operand has no batch (the left's batch folds into M),
            else one per output batch, operands at their broadcast offsets
    Gemm    one sgemm with transA/transB/alpha; C (times beta) is an epilogue term
    Conv    per image and group: im2col into the workspace (skipped for 1x1/stride 1/no pad,
            whose input already is the column matrix), one sgemm W[M/g, K] x col[K, HoWo]
    (none)  steps whose anchor runs elsewhere: the epilogue loop alone, input to output
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from math import prod

import numpy as np

from buildgen.backends.c.cwriter import (
    Code,
    broadcast_strides,
    coalesce,
    comment,
    float_literal,
    linear,
)
from buildgen.backends.cpu_common.carrays import static_array_lines
from buildgen.backends.cpu_common.geometry import window
from buildgen.backends.cpu_common.groups import Group
from buildgen.backends.cpu_common.steps import Binary
from buildgen.backends.cpu_common.values import scalar_operand
from buildgen.backends.openblas.epilogue import (
    Operand,
    Term,
    channel_strides,
    epilogue_loop,
    step_terms,
)
from buildgen.ir import Graph, Node


@dataclass(frozen=True)
class Param:
    name: str  # inside the kernel
    tensor: str  # the graph tensor bound to it; "" for the workspace
    is_output: bool = False

    def declaration(self) -> str:
        if not self.tensor:
            return f"float *restrict {self.name}"
        const = "" if self.is_output else "const "
        return f"{const}float *restrict {self.name}"


@dataclass(frozen=True)
class BlasKernel:
    name: str  # k<n>_<ops>
    group: Group
    params: tuple[Param, ...]
    statics: tuple[str, ...]  # file-scope lines: constant arrays, im2col geometry
    body: tuple[str, ...]
    workspace: int = 0  # bytes of scratch (the `col` parameter)


def _stem(group: Group, limit: int = 4) -> str:
    ops: list[str] = []
    for node in group.nodes:
        if not ops or ops[-1] != node.op.lower():
            ops.append(node.op.lower())
    return "_".join(ops[:limit]) + ("_etc" if len(ops) > limit else "")


class _Params:
    """Kernel parameters bound to tensors, one per distinct tensor, with short names."""

    def __init__(self) -> None:
        self.params: list[Param] = []
        self.by_tensor: dict[str, str] = {}

    def bind(self, tensor: str, name: str, is_output: bool = False) -> str:
        if tensor not in self.by_tensor:
            taken = {p.name for p in self.params}
            unique, n = name, 2
            while unique in taken:
                unique, n = f"{name}{n}", n + 1
            self.params.append(Param(unique, tensor, is_output))
            self.by_tensor[tensor] = unique
        return self.by_tensor[tensor]


def _sgemm(blas: str, ta: bool, tb: bool, mnk: tuple[int, int, int], alpha: float,
           a: str, lda: int, b: str, ldb: int, y: str) -> str:
    m, n, k = mnk
    trans = ("CblasTrans" if ta else "CblasNoTrans", "CblasTrans" if tb else "CblasNoTrans")
    return (f"{blas}cblas_sgemm(CblasRowMajor, {trans[0]}, {trans[1]}, {m}, {n}, {k}, "
            f"{float_literal(alpha)}, {a}, {lda}, {b}, {ldb}, 0.0f, {y}, {n});")


def _offset(pointer: str, expression: str) -> str:
    return pointer if expression == "0" else f"{pointer} + {expression}"


def _matmul(code: Code, node: Node, graph: Graph, p: _Params, blas: str) -> None:
    a_shape, b_shape = (graph.type_of(n).shape for n in node.inputs[:2])
    a2 = a_shape if len(a_shape) > 1 else (1, *a_shape)
    b2 = b_shape if len(b_shape) > 1 else (*b_shape, 1)
    m, k, n = a2[-2], a2[-1], b2[-1]
    a, b = p.bind(node.inputs[0], "a"), p.bind(node.inputs[1], "b")
    y = p.by_tensor[node.outputs[0]]
    batch = tuple(int(d) for d in np.broadcast_shapes(a2[:-2], b2[:-2]))
    if prod(b2[:-2]) == 1 and (1,) * (len(batch) - len(a2) + 2) + a2[:-2] == batch:
        # The right operand is one matrix: the left's batch dims fold into its rows.
        code.line(_sgemm(blas, False, False, (prod(batch) * m, n, k), 1.0, a, k, b, n, y))
        return
    strides = [
        tuple(s * m * n for s in broadcast_strides(batch, batch)),
        tuple(s * m * k for s in broadcast_strides(a2[:-2], batch)),
        tuple(s * k * n for s in broadcast_strides(b2[:-2], batch)),
    ]
    extents, coalesced = coalesce(batch, strides)
    code.line(f"/* {prod(batch)} products of [{m},{k}] x [{k},{n}] */")
    with code.loops(extents, prefix="b") as counters:
        ya, aa, ba = (linear(counters, s) for s in coalesced)
        code.line(_sgemm(blas, False, False, (m, n, k), 1.0, _offset(a, aa), k,
                         _offset(b, ba), n, _offset(y, ya)))


def _number(node: Node, name: str, default: float) -> float:
    value = node.attr(name, default)
    assert isinstance(value, (int, float))
    return float(value)


def _gemm(code: Code, node: Node, graph: Graph, p: _Params, blas: str,
          weights: Mapping[str, np.ndarray] | None) -> list[Term]:
    a_shape, b_shape = (graph.type_of(n).shape for n in node.inputs[:2])
    m, n = graph.type_of(node.outputs[0]).shape
    ta, tb = node.attr("transA", 0) == 1, node.attr("transB", 0) == 1
    k = a_shape[0] if ta else a_shape[1]
    alpha, beta = _number(node, "alpha", 1.0), _number(node, "beta", 1.0)
    a, b = p.bind(node.inputs[0], "a"), p.bind(node.inputs[1], "b")
    y = p.by_tensor[node.outputs[0]]
    code.line(_sgemm(blas, ta, tb, (m, n, k), alpha, a, a_shape[1], b, b_shape[1], y))
    c = node.inputs[2] if len(node.inputs) > 2 else ""
    if not c or beta == 0.0:
        return []
    what = f"+ C '{c}'" + ("" if beta == 1.0 else f" x {beta:g}")
    value = scalar_operand(Binary(node, c), graph, weights)
    if value is not None:
        return [Term(f"v + {float_literal(beta * value)}", what=what)]
    factor = "" if beta == 1.0 else f"{float_literal(beta)} * "
    operand = Operand(p.bind(c, "c"), broadcast_strides(graph.type_of(c).shape, (m, n)))
    return [Term(f"v + {factor}{{0}}", (operand,), what)]


def _conv(code: Code, node: Node, graph: Graph, p: _Params, blas: str, prefix: str
          ) -> tuple[list[Term], list[str], int]:
    """The conv's sgemm loop; returns (bias terms, file-scope lines, workspace bytes)."""
    x_shape = graph.type_of(node.inputs[0]).shape
    w_shape = graph.type_of(node.inputs[1]).shape
    y_shape = graph.type_of(node.outputs[0]).shape
    geo = window(node, x_shape, y_shape, w_shape[2:])
    if geo.rank == 1:  # a 1-D conv is a 2-D conv of height 1
        geo = type(geo)((1, *geo.size), (1, *geo.out), (1, *geo.kernel), (1, *geo.strides),
                        (1, *geo.dilations), (0, *geo.pads_begin), (0, *geo.pads_end))
    batch, channels = x_shape[0], x_shape[1]
    groups = channels // w_shape[1]
    cg, mg = w_shape[1], w_shape[0] // groups
    kg = cg * prod(geo.kernel)
    plane, out_plane = prod(geo.size), prod(geo.out)
    x, w = p.bind(node.inputs[0], "x"), p.bind(node.inputs[1], "w")
    y = p.by_tensor[node.outputs[0]]
    statics: list[str] = []
    workspace = 0
    if not geo.is_pointwise:
        workspace = kg * out_plane * 4
        fields = [
            ("channels", cg), ("ih", geo.size[0]), ("iw", geo.size[1]), ("kh", geo.kernel[0]),
            ("kw", geo.kernel[1]), ("sh", geo.strides[0]), ("sw", geo.strides[1]),
            ("dh", geo.dilations[0]), ("dw", geo.dilations[1]), ("ph", geo.pads_begin[0]),
            ("pw", geo.pads_begin[1]), ("oh", geo.out[0]), ("ow", geo.out[1]),
        ]
        body = ", ".join(f".{k} = {v}" for k, v in fields)
        statics.append(f"static const bg_im2col_geometry {prefix}_geometry = {{{body}}};")
    # (counter, extent, x stride, y stride, w stride): images, then groups; none of extent 1
    loops = [("n", batch, channels * plane, w_shape[0] * out_plane, 0),
             ("g", groups, cg * plane, mg * out_plane, mg * kg)]
    loops = [loop for loop in loops if loop[1] > 1]
    with ExitStack() as stack:
        for counter, extent, *_ in loops:
            stack.enter_context(
                code.block(f"for (int64_t {counter} = 0; {counter} < {extent}; ++{counter})")
            )
        counters = [loop[0] for loop in loops]
        x_at = _offset(x, linear(counters, [loop[2] for loop in loops]))
        y_at = _offset(y, linear(counters, [loop[3] for loop in loops]))
        w_at = _offset(w, linear(counters, [loop[4] for loop in loops]))
        column = x_at
        if not geo.is_pointwise:
            code.line(f"bg_im2col({x_at}, &{prefix}_geometry, col);")
            column = "col"
        code.line(_sgemm(blas, False, False, (mg, out_plane, kg), 1.0, w_at, kg, column,
                         out_plane, y_at))
    bias = node.inputs[2] if len(node.inputs) > 2 else ""
    terms = []
    if bias:
        operand = Operand(p.bind(bias, "bias"), channel_strides(y_shape))
        terms.append(Term("v + {0}", (operand,), f"+ bias '{bias}'"))
    return terms, statics, workspace


def node_line(graph: Graph, node: Node) -> str:
    def shaped(t: str) -> str:
        return f"{t}{list(graph.type_of(t).shape)}".replace(" ", "")

    ins = ", ".join(shaped(t) for t in node.inputs if t)
    outs = ", ".join(shaped(t) for t in node.outputs if t)
    return comment(f"{node.op} '{node.name}': {ins} -> {outs}")


def lower_group(
    group: Group, index: int, graph: Graph, blas: str,
    weights: Mapping[str, np.ndarray] | None,
) -> BlasKernel:
    """The kernel of `group`, the index-th of the module (its name is k<index>_<ops>)."""
    name = f"k{index}_{_stem(group)}"
    p = _Params()
    code = Code()
    shape = graph.type_of(group.output).shape
    p.bind(group.output, "y", is_output=True)
    anchor = group.anchor
    if anchor is not None:
        # The anchor writes into the group's output; the epilogue then works in place.
        p.by_tensor[anchor.outputs[0]] = "y"
    terms: list[Term] = []
    statics: list[str] = []
    workspace = 0
    source = "y"
    if anchor is None:
        source = p.bind(group.source, "x")
    elif anchor.op == "MatMul":
        _matmul(code, anchor, graph, p, blas)
    elif anchor.op == "Gemm":
        terms += _gemm(code, anchor, graph, p, blas, weights)
    else:
        bias, statics, workspace = _conv(code, anchor, graph, p, blas, f"k{index}")
        terms += bias
    names = {s.other: p.bind(s.other, "r") for s in group.steps
             if isinstance(s, Binary) and scalar_operand(s, graph, weights) is None}
    more, arrays = step_terms(group.steps, shape, graph, weights, names, f"k{index}")
    terms += more
    epilogue_loop(code, shape, source, "y", terms)
    params = [q for q in p.params if not q.is_output] + [q for q in p.params if q.is_output]
    if workspace:
        params.append(Param("col", ""))
    lines = [line for array in arrays for line in static_array_lines(array)] + statics
    return BlasKernel(name, group, tuple(params), tuple(lines), code.lines, workspace)
