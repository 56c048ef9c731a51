"""MatMul and Gemm through bg_sgemm, with a fused bias/activation epilogue.

A constant B (a Linear layer's weights) is packed once, at create, into the GEMM's
micro-panels (bg_sgemm_pack_b) and each call runs bg_sgemm_prepacked: re-packing it on every
call cost 7% of the encoder's run time.

MatMul follows numpy: 1-D operands gain (and lose) a unit dim, batch dims broadcast.
When B has no batch of its own and A's batches are contiguous, the batches fold into M
(one GEMM over batch*M rows, the common Linear-layer case); otherwise a loop over the
batch calls bg_sgemm once per matrix with constant offsets.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from buildgen.backends.c.cwriter import (
    Code,
    broadcast_strides,
    coalesce,
    contiguous_strides,
    float_literal,
    linear,
)
from buildgen.backends.c.epilogue import Epilogue, build_epilogue
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import POOL, Kernel, LowerContext, Packed, Param
from buildgen.backends.c.ops.common import float_attr, float_reason, input_at, int_attr
from buildgen.backends.c.registry import OpEntry
from buildgen.backends.c.workspace import sgemm_packed_b_bytes, sgemm_workspace_bytes
from buildgen.ir import Graph, Node


def _params(
    ctx: LowerContext, nodes: Sequence[Node], inputs: Sequence[tuple[str, str]], ep: Epilogue
) -> list[Param]:
    params = [Param(name, tensor, "float") for name, tensor in inputs if tensor]
    if ep.bias:
        params.append(Param("bias", ep.bias, "float"))
    params.append(Param("Y", nodes[-1].outputs[0], "float", is_output=True))
    params.append(Param("ws", "", "void"))
    params.append(POOL)
    return params


def _packs_b(ctx: LowerContext, b: str, m: int, n: int) -> bool:
    """Pack a constant B once at create: the blocked GEMM then never re-packs it. A matrix-
    vector product (M or N of 1) streams B in place instead, so packing would only add."""
    return ctx.graph.is_weight(b) and m > 1 and n > 1


def _packed_b(b: str, trans_b: int, n: int, k: int, ldb: int) -> Packed:
    return Packed(
        "Bp", b, sgemm_packed_b_bytes(n, k),
        pack=f"bg_sgemm_pack_b({trans_b}, {n}, {k}, {{src}}, {ldb}, {{dst}});",
        check=f"bg_sgemm_packed_b_bytes({n}, {k})",
    )


PACKED_B = Param("Bp", "", "void", packed=True)


def _lower_matmul(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    ep = build_epilogue(ctx, node, nodes[1:])
    a, b = node.inputs
    a_shape, b_shape = ctx.shape(a), ctx.shape(b)
    a_mat = a_shape if len(a_shape) >= 2 else (1, *a_shape)
    b_mat = b_shape if len(b_shape) >= 2 else (*b_shape, 1)
    m, k, n = a_mat[-2], a_mat[-1], b_mat[-1]
    batch = tuple(np.broadcast_shapes(a_mat[:-2], b_mat[:-2]))
    strides = [
        tuple(s * m * k for s in broadcast_strides(a_mat[:-2], batch)),
        tuple(s * k * n for s in broadcast_strides(b_mat[:-2], batch)),
        tuple(s * m * n for s in contiguous_strides(batch)),
    ]
    extents, (sa, sb, sy) = coalesce(batch, strides)
    if len(extents) == 1 and sb[0] == 0 and sa[0] == m * k:
        # batches of A stacked into one tall matrix: a single GEMM
        m, extents, sa, sb, sy = m * extents[0], (), (), (), ()
    packed = _packs_b(ctx, b, m, n) and not any(sb)
    code = Code()
    ep_arg = ep.declare(code)
    alpha = float_literal(ep.scale)
    with code.loops(extents, prefix="b") as idx:
        pa, pb, py = (linear(idx, s) for s in (sa, sb, sy))
        if packed:
            code.line(
                f"bg_sgemm_prepacked(0, {m}, {n}, {k}, {alpha}, {_at('A', pa)}, {k}, Bp, 0.0f, "
                f"{_at('Y', py)}, {n}, {ep_arg}, ws, pool);"
            )
        else:
            code.line(
                f"bg_sgemm(0, 0, {m}, {n}, {k}, {alpha}, {_at('A', pa)}, {k}, "
                f"{_at('B', pb)}, {n}, 0.0f, {_at('Y', py)}, {n}, {ep_arg}, ws, pool);"
            )
    params = _params(ctx, nodes, [("A", a), ("B", "" if packed else b)], ep)
    return Kernel(
        kernel_stem(nodes),
        tuple(nodes),
        (PACKED_B, *params) if packed else tuple(params),
        code.lines,
        workspace=sgemm_workspace_bytes(m, n, k),
        workspace_check=f"bg_sgemm_workspace_bytes({m}, {n}, {k})",
        packed=(_packed_b(b, 0, n, k, n),) if packed else (),
    )


def _at(pointer: str, offset: str) -> str:
    return pointer if offset == "0" else f"{pointer} + {offset}"


def _lower_gemm(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    a, b, c = node.inputs[0], node.inputs[1], input_at(node, 2)
    trans_a, trans_b = int_attr(node, "transA", 0), int_attr(node, "transB", 0)
    alpha, beta = float_attr(node, "alpha", 1.0), float_attr(node, "beta", 1.0)
    a_shape, b_shape = ctx.shape(a), ctx.shape(b)
    m, k = (a_shape[1], a_shape[0]) if trans_a else a_shape
    n = b_shape[0] if trans_b else b_shape[1]
    ep = build_epilogue(ctx, node, nodes[1:])
    code = Code()
    call_beta = 0.0
    inputs = [("A", a), ("B", b)]
    if c:
        c_shape = ctx.shape(c)
        if beta == 1.0 and c_shape in ((n,), (1, n)):
            ep = Epilogue(c, 0, ep.activation)  # C is a per-column bias
        elif beta == 1.0 and c_shape == (m, 1) and m != 1:
            ep = Epilogue(c, 1, ep.activation)  # C is a per-row bias
        else:
            # Y starts as C broadcast to [M, N]; bg_sgemm then adds alpha*AB onto beta*Y.
            inputs.append(("C", c))
            call_beta = beta
            extents, (sc, sy) = coalesce(
                (m, n), [broadcast_strides(c_shape, (m, n)), contiguous_strides((m, n))]
            )
            with code.loops(extents) as idx:
                code.line(f"Y[{linear(idx, sy)}] = C[{linear(idx, sc)}];")
    ep_arg = ep.declare(code)
    scale, call_b = float_literal(alpha * ep.scale), float_literal(call_beta)
    packed = _packs_b(ctx, b, m, n)
    if packed:
        inputs[1] = ("B", "")
        code.line(
            f"bg_sgemm_prepacked({trans_a}, {m}, {n}, {k}, {scale}, A, {a_shape[1]}, Bp, "
            f"{call_b}, Y, {n}, {ep_arg}, ws, pool);"
        )
    else:
        code.line(
            f"bg_sgemm({trans_a}, {trans_b}, {m}, {n}, {k}, {scale}, A, {a_shape[1]}, "
            f"B, {b_shape[1]}, {call_b}, Y, {n}, {ep_arg}, ws, pool);"
        )
    params = _params(ctx, nodes, inputs, ep)
    return Kernel(
        kernel_stem(nodes),
        tuple(nodes),
        (PACKED_B, *params) if packed else tuple(params),
        code.lines,
        workspace=sgemm_workspace_bytes(m, n, k),
        workspace_check=f"bg_sgemm_workspace_bytes({m}, {n}, {k})",
        packed=(_packed_b(b, trans_b, n, k, b_shape[1]),) if packed else (),
    )


def _check_matmul(node: Node, graph: Graph) -> str | None:
    if any(graph.type_of(t).rank == 0 for t in node.inputs):
        return "MatMul with a scalar operand not supported (ONNX requires rank >= 1)"
    return float_reason(node, graph)


def _check_gemm(node: Node, graph: Graph) -> str | None:
    if graph.type_of(node.inputs[0]).rank != 2 or graph.type_of(node.inputs[1]).rank != 2:
        return "Gemm with A or B not 2-D not supported"
    return float_reason(node, graph)


ENTRIES = (
    OpEntry("MatMul", "kernel", _check_matmul, lower=_lower_matmul),
    OpEntry("Gemm", "kernel", _check_gemm, lower=_lower_gemm),
)
