"""The fused epilogue of a GPU library call, as one small CUDA kernel of the module.

cuBLAS and cuDNN fuse a few epilogues themselves (a bias, a ReLU); whatever else follows a
GEMM or a convolution in a fused chain (another activation, a scale, a residual Add, an
inference BatchNormalization) runs in one elementwise kernel over the call's output, one
thread per element, every step applied while the value is in a register. The terms are the
openblas epilogue's (buildgen.backends.openblas.epilogue): the same C expressions compile as
CUDA device code. Operands are read at their broadcast index, computed from the element's
index over the output's coalesced dims; a folded BatchNormalization's scale and shift are
`__device__` arrays of the module, so nothing is uploaded at create for them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from buildgen.backends.c.cwriter import coalesce, comment, contiguous_strides, float_literal, linear
from buildgen.backends.cpu_common.carrays import StaticArray
from buildgen.backends.cpu_common.groups import Group
from buildgen.backends.cpu_common.steps import Binary, Step
from buildgen.backends.openblas.epilogue import Operand, Term, step_terms
from buildgen.ir import Graph

THREADS = 256  # threads per block of every epilogue kernel


def device_array_lines(array: StaticArray) -> list[str]:
    """A constant float array in device global memory (readable by kernels, and by library
    calls through cudaGetSymbolAddress)."""
    values = [float_literal(v) for v in array.values]
    lines = [f"/* {comment(array.what)} */",
             f"static __device__ const float {array.name}[{len(values)}] = {{"]
    for start in range(0, len(values), 8):
        lines.append("    " + ", ".join(values[start : start + 8]) + ",")
    lines.append("};")
    return lines


@dataclass(frozen=True)
class Epilogue:
    """`dest[i] = terms(source[i])` over a contiguous float tensor of `shape`."""

    name: str  # the kernel's name, e.g. "k0_epilogue"
    shape: tuple[int, ...]
    terms: tuple[Term, ...]
    params: tuple[str, ...]  # tensors passed as p0, p1, ... (weights or activations)
    arrays: tuple[StaticArray, ...]  # __device__ constants the terms read

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    def describe(self) -> str:
        return "; ".join(t.what or t.expression for t in self.terms)

    def definition(self) -> list[str]:
        operands = [o for t in self.terms for o in t.operands]
        own = contiguous_strides(self.shape)
        extents, strides = coalesce(self.shape, [own, *(o.strides for o in operands)])
        counters = [f"c{d}" for d in range(len(extents))]
        body = [f"    if (i >= {self.numel}u) return;"]
        # The coordinates an operand read at its own strides needs, innermost first.
        needed = {d for s in strides[1:] if s != strides[0] for d, v in enumerate(s) if v}
        if needed:
            body.append("    size_t r = i;")
            for d in range(len(extents) - 1, min(needed) - 1, -1):
                if d == 0:
                    body.append("    const size_t c0 = r;")
                    continue
                if d in needed:
                    body.append(f"    const size_t c{d} = r % {extents[d]}u;")
                if d > min(needed):
                    body.append(f"    r /= {extents[d]}u;")
        body.append("    float v = x[i];")
        position = 1
        for term in self.terms:
            refs = []
            for operand in term.operands:
                index = "i" if strides[position] == strides[0] else linear(
                    counters, strides[position])
                refs.append(f"{operand.name}[{index}]")
                position += 1
            body.append(f"    v = {term.expression.format(*refs)};")
        body.append("    y[i] = v;")
        params = "".join(f", const float *p{j}" for j in range(len(self.params)))
        return [
            f"/* {self.name}: {comment(self.describe())} */",
            f"static __global__ void {self.name}(float *y, const float *x{params})",
            "{",
            "    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;",
            *body,
            "}",
        ]

    def launch(self, dest: str, source: str, pointer: Callable[[str], str]) -> list[str]:
        """The launch on env->stream, then the launch-error check (BG_CUDA_LAUNCH)."""
        blocks = -(-self.numel // THREADS)
        args = "".join(f", {pointer(t)}" for t in self.params)
        return [f"{self.name}<<<{blocks}, {THREADS}, 0, stream>>>({dest}, {source}{args});",
                f'BG_CUDA_LAUNCH("{self.name}");']


def _inlined(step: Binary, graph: Graph) -> bool:
    """A one-element constant operand is written into the kernel as a literal."""
    return graph.is_weight(step.other) and graph.type_of(step.other).numel == 1


def epilogue_for(
    name: str,
    steps: Sequence[Step],
    shape: tuple[int, ...],
    graph: Graph,
    weights: Mapping[str, np.ndarray] | None,
    lead: Sequence[tuple[Term, str | None]] = (),
) -> Epilogue | None:
    """The kernel applying `lead` terms (each with the tensor its {0} reads, if any) then
    `steps`, or None when there is nothing to apply."""
    params = list(dict.fromkeys(
        [t for _, t in lead if t is not None]
        + [s.other for s in steps if isinstance(s, Binary) and not _inlined(s, graph)]
    ))
    names = {t: f"p{j}" for j, t in enumerate(params)}
    terms: list[Term] = []
    for term, tensor in lead:
        if tensor is None:
            terms.append(term)
        else:
            operands = tuple(Operand(names[tensor], o.strides) for o in term.operands)
            terms.append(Term(term.expression, operands, term.what))
    step_list, arrays = step_terms(steps, shape, graph, weights, names, name)
    terms += step_list
    if not terms:
        return None
    return Epilogue(name, shape, tuple(terms), tuple(params), tuple(arrays))


@dataclass(frozen=True)
class StandaloneCall:
    """A library backend's group whose anchor runs elsewhere (cuBLAS, cuDNN): its steps as
    one epilogue kernel, `source` -> `output`."""

    index: int
    group: Group
    source: str
    output: str
    epilogue: Epilogue

    @property
    def name(self) -> str:
        return f"k{self.index}"
