"""Det: the determinant of each trailing M x M matrix, by Gaussian elimination with
partial pivoting in double precision (a row swap flips the sign)."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from buildgen.backends.c.cwriter import Code
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import float_reason
from buildgen.backends.c.registry import OpEntry
from buildgen.ir import Graph, Node


def _lower(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    shape = ctx.shape(x)
    m, batch = shape[-1], prod(shape[:-2])
    code = Code()
    with code.block(f"for (int64_t b = 0; b < {batch}; ++b)"):
        code.line(f"double a[{m}][{m}];")
        code.line(
            f"for (int64_t i = 0; i < {m * m}; ++i) a[i / {m}][i % {m}] = X[b * {m * m} + i];"
        )
        code.line("double det = 1.0;")
        with code.block(f"for (int64_t k = 0; k < {m} && det != 0.0; ++k)"):
            code.line("int64_t p = k;")
            code.line(
                f"for (int64_t i = k + 1; i < {m}; ++i) if (fabs(a[i][k]) > fabs(a[p][k])) p = i;"
            )
            with code.block("if (p != k)"):
                with code.block(f"for (int64_t j = 0; j < {m}; ++j)"):
                    code.line("const double t = a[k][j];")
                    code.line("a[k][j] = a[p][j];")
                    code.line("a[p][j] = t;")
                code.line("det = -det;")
            code.line("det *= a[k][k];")
            with code.block(f"for (int64_t i = k + 1; i < {m} && det != 0.0; ++i)"):
                code.line("const double f = a[i][k] / a[k][k];")
                code.line(f"for (int64_t j = k + 1; j < {m}; ++j) a[i][j] -= f * a[k][j];")
        code.line("Y[b] = (float)det;")
    params = (Param("X", x, "float"), Param("Y", y, "float", True))
    return Kernel(kernel_stem(nodes), tuple(nodes), params, code.lines)


def _check(node: Node, graph: Graph) -> str | None:
    shape = graph.type_of(node.inputs[0]).shape
    if len(shape) < 2 or shape[-1] != shape[-2]:
        return f"Det of shape {shape} not supported (square trailing matrices only)"
    return float_reason(node, graph)


ENTRIES = (OpEntry("Det", "kernel", _check, lower=_lower),)
