"""One group of a cublas region as the calls that run it.

A GEMM goes through cuBLASLt when its chain starts with what a cuBLASLt epilogue computes:
a bias along N (an Add of a constant [N], or Gemm's C when it is one and beta is 1), then
optionally ReLU, or GELU in its tanh form (cuBLASLt's GELU epilogue is the tanh
approximation, so the erf GELU exporters write is left to the epilogue kernel, exact). Any
other GEMM is one cublasGemmStridedBatchedEx. The steps left after that run in one
epilogue kernel of the module (buildgen.backends.gpu_epilogue), as does a group whose
anchor ran elsewhere.

cuBLAS is column-major: the row-major Y[M, N] = A·B is computed as the column-major
Y^T[N, M] = B^T·A^T, so the calls get (B, A) with m = N, n = M.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from buildgen.backends.c.cwriter import broadcast_strides, float_literal
from buildgen.backends.cpu_common.groups import Group
from buildgen.backends.cpu_common.steps import Act, Binary, Step
from buildgen.backends.cpu_common.values import weight
from buildgen.backends.cublas.support import GemmGeometry, gemm_geometry
from buildgen.backends.gpu_epilogue import Epilogue, StandaloneCall, epilogue_for
from buildgen.backends.openblas.epilogue import Operand, Term
from buildgen.errors import error
from buildgen.ir import Graph, Node

LT_EPILOGUES = {
    (True, ""): "CUBLASLT_EPILOGUE_BIAS",
    (True, "relu"): "CUBLASLT_EPILOGUE_RELU_BIAS",
    (True, "gelu"): "CUBLASLT_EPILOGUE_GELU_BIAS",
    (False, "relu"): "CUBLASLT_EPILOGUE_RELU",
    (False, "gelu"): "CUBLASLT_EPILOGUE_GELU",
}


@dataclass(frozen=True)
class GemmCall:
    index: int  # k<index> in the module
    group: Group
    geometry: GemmGeometry
    a: str  # tensors (pointer expressions are the region's business)
    b: str
    output: str
    lt_epilogue: str | None  # a CUBLASLT_EPILOGUE_* when cuBLASLt runs it, else None
    bias: str | None  # the bias weight cuBLASLt adds
    fused: tuple[str, ...]  # what cuBLAS computes besides the product, for comments
    epilogue: Epilogue | None  # the kernel for the rest

    @property
    def name(self) -> str:
        return f"k{self.index}"


Call = GemmCall | StandaloneCall


def _is_bias(graph: Graph, name: str, n: int) -> bool:
    """A constant that broadcasts along N only: shape [N], [1, N], [1, 1, N], ..."""
    shape = graph.type_of(name).shape
    return graph.is_weight(name) and bool(shape) and shape[-1] == n and \
        graph.type_of(name).numel == n


def _lt_act(step: Step) -> str | None:
    if isinstance(step, Act) and step.node.op == "Relu":
        return "relu"
    if isinstance(step, Act) and step.node.op == "Gelu" and \
            step.node.attr("approximate", "none") == "tanh":
        return "gelu"
    return None


def _gemm_c(anchor: Node) -> tuple[str, float]:
    c = anchor.inputs[2] if anchor.op == "Gemm" and len(anchor.inputs) > 2 else ""
    beta = anchor.attr("beta", 1.0)
    assert isinstance(beta, (int, float))
    return c, float(beta)


def _c_term(graph: Graph, anchor: Node, weights: Mapping[str, np.ndarray] | None
            ) -> tuple[Term, str | None] | None:
    """Gemm's `+ beta * C` as a leading epilogue term, when C is not cuBLASLt's bias."""
    c, beta = _gemm_c(anchor)
    if not c or beta == 0.0:
        return None
    what = f"Gemm '{anchor.name}': + {float_literal(beta)} * C"
    out = graph.type_of(anchor.outputs[0]).shape
    if graph.is_weight(c) and graph.type_of(c).numel == 1:
        value = beta * float(weight(weights, anchor, c).reshape(-1)[0])
        return Term(f"v + {float_literal(value)}", (), what), None
    scale = "" if beta == 1.0 else f"{float_literal(beta)} * "
    strides = broadcast_strides(graph.type_of(c).shape, out)
    return Term(f"v + {scale}{{0}}", (Operand(c, strides),), what), c


def lower_gemm(index: int, group: Group, graph: Graph,
               weights: Mapping[str, np.ndarray] | None) -> GemmCall:
    anchor = group.anchor
    assert anchor is not None
    geometry = gemm_geometry(anchor, graph)
    if isinstance(geometry, str):
        raise error(f"cublas backend cannot run node '{anchor.name}' ({anchor.op}): {geometry}")
    steps = list(group.steps)
    c, beta = _gemm_c(anchor)
    bias: str | None = None
    act: str | None = None
    c_is_bias = bool(c) and beta == 1.0 and _is_bias(graph, c, geometry.n)
    if geometry.batch == 1 and (not c or c_is_bias):
        if c_is_bias:
            bias = c
        elif steps and isinstance(steps[0], Binary) and steps[0].op == "Add" and \
                _is_bias(graph, steps[0].other, geometry.n):
            bias = steps[0].other
            steps.pop(0)
        act = _lt_act(steps[0]) if steps else None
        if act is not None:
            steps.pop(0)
    lt = LT_EPILOGUES.get((bias is not None, act or ""))
    fused = [f"bias '{bias}'"] if bias else []
    fused += [act] if act else []
    lead = [] if c_is_bias and lt else [t for t in [_c_term(graph, anchor, weights)] if t]
    shape = graph.type_of(anchor.outputs[0]).shape
    epilogue = epilogue_for(f"k{index}_epilogue", steps, shape, graph, weights, lead)
    return GemmCall(index, group, geometry, anchor.inputs[0], anchor.inputs[1], group.output,
                    lt, bias, tuple(fused), epilogue)


def lower_group(index: int, group: Group, graph: Graph,
                weights: Mapping[str, np.ndarray] | None) -> Call:
    if group.anchor is not None:
        return lower_gemm(index, group, graph, weights)
    shape = graph.type_of(group.output).shape
    epilogue = epilogue_for(f"k{index}_epilogue", group.steps, shape, graph, weights)
    assert epilogue is not None  # a group without an anchor has at least one step
    return StandaloneCall(index, group, group.source, group.output, epilogue)
