"""Normalizations: BatchNormalization (inference and training mode), LayerNormalization,
InstanceNormalization, GroupNormalization, RMSNormalization, MeanVarianceNormalization,
LpNormalization and LRN. Softmax and its kin are in softmax.py."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from buildgen.backends.c.cwriter import Code, float_literal, linear
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import POOL, Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import (
    float_attr,
    float_reason,
    input_at,
    int_attr,
    ints_attr,
    normalize_axis,
    present,
)
from buildgen.backends.c.ops.reduce import plus, split_loops
from buildgen.backends.c.ops.softmax import lanes
from buildgen.backends.c.registry import OpEntry
from buildgen.backends.c.split import split_fields
from buildgen.ir import Graph, Node


def _kernel(nodes: Sequence[Node], params: list[Param], code: Code) -> Kernel:
    return Kernel(kernel_stem(nodes), tuple(nodes), tuple(params), code.lines)


def _lower_batchnorm(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    if int_attr(node, "training_mode", 0):
        return _lower_batchnorm_training(ctx, nodes)
    x, scale, bias, mean, var = node.inputs[:5]
    y = node.outputs[0]
    shape = ctx.shape(x)
    n, c = shape[0], shape[1]
    size = prod(shape[2:])
    eps = float_literal(float_attr(node, "epsilon", 1e-5))
    split = split_fields(c, n * c * size)  # channels are independent: share them out
    code = Code()
    with code.block(f"for (int64_t c = {'lo' if split else 0}; c < {'hi' if split else c}; ++c)"):
        code.line(f"const float a = S[c] / sqrtf(V[c] + {eps});")
        code.line("const float b = B[c] - M[c] * a;")
        with code.block(f"for (int64_t n = 0; n < {n}; ++n)"):
            code.line(f"const float *x = X + (n * {c} + c) * {size};")
            code.line(f"float *y = Y + (n * {c} + c) * {size};")
            code.line(f"for (int64_t j = 0; j < {size}; ++j) y[j] = x[j] * a + b;")
    params = [
        Param("X", x, "float"),
        Param("S", scale, "float"),
        Param("B", bias, "float"),
        Param("M", mean, "float"),
        Param("V", var, "float"),
        Param("Y", y, "float", True),
        *([POOL] if split else []),
    ]
    return Kernel(kernel_stem(nodes), tuple(nodes), tuple(params), code.lines, **split)


def _lower_batchnorm_training(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """training_mode=1 (opset 14+): normalize with the batch's own statistics, taken per
    channel over N and the spatial dims (the variance is the biased one), and blend them
    into the running statistics: running = input * momentum + batch * (1 - momentum).
    The sums run in double: a channel can hold many elements."""
    node = nodes[0]
    x, scale, bias, mean, var = node.inputs[:5]
    shape = ctx.shape(x)
    n, c, size = shape[0], shape[1], prod(shape[2:])
    count = f"{n * size}.0"
    eps = float_literal(float_attr(node, "epsilon", 1e-5))
    momentum = float_literal(float_attr(node, "momentum", 0.9))
    stats = [(name, node.outputs[i]) for i, name in ((1, "RM"), (2, "RV")) if output_at(node, i)]
    code = Code()
    with code.block(f"for (int64_t c = 0; c < {c}; ++c)"):
        code.line("double sum = 0.0, squares = 0.0;")
        with code.loops((n, size), prefix="i") as (i, j):
            code.line(f"sum += X[({i} * {c} + c) * {size} + {j}];")
        code.line(f"const float mean = (float)(sum / {count});")
        with code.loops((n, size), prefix="i") as (i, j):
            code.line(f"const float d = X[({i} * {c} + c) * {size} + {j}] - mean;")
            code.line("squares += (double)d * d;")
        code.line(f"const float var = (float)(squares / {count});")
        code.line(f"const float a = S[c] / sqrtf(var + {eps});")
        with code.loops((n, size), prefix="i") as (i, j):
            at = f"({i} * {c} + c) * {size} + {j}"
            code.line(f"Y[{at}] = (X[{at}] - mean) * a + B[c];")
        for name, _ in stats:
            batch, given = ("mean", "M") if name == "RM" else ("var", "V")
            code.line(f"{name}[c] = {given}[c] * {momentum} + {batch} * (1.0f - {momentum});")
    params = [
        Param("X", x, "float"),
        Param("S", scale, "float"),
        Param("B", bias, "float"),
        Param("M", mean, "float"),
        Param("V", var, "float"),
        Param("Y", node.outputs[0], "float", True),
        *(Param(name, tensor, "float", True) for name, tensor in stats),
    ]
    return _kernel(nodes, params, code)


def _normalize_rows(code: Code, n: int, eps: str) -> None:
    """Declares mean and inv (1/stddev) of the row x[0:n]."""
    code.line("float mean = 0.0f, var = 0.0f;")
    code.line(f"for (int64_t j = 0; j < {n}; ++j) mean += x[j];")
    code.line(f"mean /= {n}.0f;")
    code.line(f"for (int64_t j = 0; j < {n}; ++j) var += (x[j] - mean) * (x[j] - mean);")
    code.line(f"const float inv = 1.0f / sqrtf(var / {n}.0f + {eps});")


def _lower_layernorm(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, scale, bias, y = node.inputs[0], node.inputs[1], input_at(node, 2), node.outputs[0]
    shape = ctx.shape(x)
    axis = normalize_axis(int_attr(node, "axis", -1), len(shape))
    outer, n = prod(shape[:axis]), prod(shape[axis:])
    eps = float_literal(float_attr(node, "epsilon", 1e-5))
    s_idx = "j" if ctx.graph.type_of(scale).numel == n else "0"
    b_term = ""
    if bias:
        b_term = f" + B[{'j' if ctx.graph.type_of(bias).numel == n else '0'}]"
    extra_outputs = [
        (index, name) for index, name in ((1, "M"), (2, "I")) if output_at(node, index)
    ]
    extra = [(name, "mean" if name == "M" else "inv") for _, name in extra_outputs]
    code = Code()
    with code.block(f"for (int64_t o = 0; o < {outer}; ++o)"):
        code.line(f"const float *x = X + o * {n};")
        code.line(f"float *y = Y + o * {n};")
        _normalize_rows(code, n, eps)
        code.line(
            f"for (int64_t j = 0; j < {n}; ++j) y[j] = (x[j] - mean) * inv * S[{s_idx}]{b_term};"
        )
        # the optional Mean and InvStdDev outputs hold one value per normalized row
        for name, value in extra:
            code.line(f"{name}[o] = {value};")
    params = [Param("X", x, "float"), Param("S", scale, "float")]
    if bias:
        params.append(Param("B", bias, "float"))
    params.append(Param("Y", y, "float", True))
    params += [Param(name, node.outputs[index], "float", True) for index, name in extra_outputs]
    return _kernel(nodes, params, code)


def output_at(node: Node, index: int) -> str:
    return node.outputs[index] if index < len(node.outputs) else ""


def _lower_instancenorm(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    x, scale, bias, y = node.inputs[0], node.inputs[1], node.inputs[2], node.outputs[0]
    shape = ctx.shape(x)
    n = prod(shape[2:])
    eps = float_literal(float_attr(node, "epsilon", 1e-5))
    code = Code()
    with code.block(f"for (int64_t o = 0; o < {shape[0] * shape[1]}; ++o)"):
        code.line(f"const int64_t c = o % {shape[1]};")
        code.line(f"const float *x = X + o * {n};")
        code.line(f"float *y = Y + o * {n};")
        _normalize_rows(code, n, eps)
        code.line(f"for (int64_t j = 0; j < {n}; ++j) y[j] = (x[j] - mean) * inv * S[c] + B[c];")
    params = [
        Param("X", x, "float"),
        Param("S", scale, "float"),
        Param("B", bias, "float"),
        Param("Y", y, "float", True),
    ]
    return _kernel(nodes, params, code)


def _lower_groupnorm(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """Each group of C / num_groups channels is normalized as one row; scale and bias are
    per channel (opset 21) or per group (opset 18, where they hold num_groups values)."""
    node = nodes[0]
    x, scale, bias, y = node.inputs[0], node.inputs[1], node.inputs[2], node.outputs[0]
    shape = ctx.shape(x)
    c, groups, size = shape[1], int_attr(node, "num_groups", 1), prod(shape[2:])
    per_group = c // groups
    eps = float_literal(float_attr(node, "epsilon", 1e-5))
    at = "c" if ctx.graph.type_of(scale).numel == c else "g"
    code = Code()
    with code.block(f"for (int64_t o = 0; o < {shape[0] * groups}; ++o)"):
        code.line(f"const int64_t g = o % {groups};")
        code.line(f"const float *x = X + o * {per_group * size};")
        code.line(f"float *y = Y + o * {per_group * size};")
        _normalize_rows(code, per_group * size, eps)
        if at == "g":
            code.line("const float a = inv * S[g], b = B[g] - mean * a;")
            code.line(f"for (int64_t j = 0; j < {per_group * size}; ++j) y[j] = x[j] * a + b;")
        else:
            with code.block(f"for (int64_t k = 0; k < {per_group}; ++k)"):
                code.line(f"const int64_t c = g * {per_group} + k;")
                code.line("const float a = inv * S[c], b = B[c] - mean * a;")
                code.line(
                    f"for (int64_t j = k * {size}; j < (k + 1) * {size}; ++j) y[j] = x[j] * a + b;"
                )
    params = [
        Param("X", x, "float"),
        Param("S", scale, "float"),
        Param("B", bias, "float"),
        Param("Y", y, "float", True),
    ]
    return _kernel(nodes, params, code)


def _lower_mvn(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """y = (x - mean) / (sqrt(mean(x^2) - mean^2) + 1e-9) over `axes`, as the op's
    function body computes it."""
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    shape = ctx.shape(x)
    axes = sorted({normalize_axis(a, len(shape)) for a in ints_attr(node, "axes", (0, 2, 3))})
    n = prod(shape[a] for a in axes)
    k_ext, k_in, _, r_ext, r_in = split_loops(shape, axes)
    code = Code()
    with code.loops(k_ext, prefix="i") as ki:
        base = linear(ki, k_in)
        code.line("float sum = 0.0f, squares = 0.0f;")
        with code.loops(r_ext, prefix="r") as ri:
            code.line(f"const float v = X[{plus(base, linear(ri, r_in))}];")
            code.line("sum += v;")
            code.line("squares += v * v;")
        code.line(f"const float mean = sum / {n}.0f;")
        code.line(f"const float scale = 1.0f / (sqrtf(squares / {n}.0f - mean * mean) + 1e-9f);")
        with code.loops(r_ext, prefix="r") as ri:
            at = plus(base, linear(ri, r_in))
            code.line(f"Y[{at}] = (X[{at}] - mean) * scale;")
    return _kernel(nodes, [Param("X", x, "float"), Param("Y", y, "float", True)], code)


def _lower_lrn(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """Local response normalization across channels, for any rank >= 2 (N, C, D1, ...):
    y = x / (bias + alpha / size * s) ^ beta, where s sums the squares of x over the
    channels [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] clipped to [0, C).
    The sums build up in y, one neighbouring channel at a time."""
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    shape = ctx.shape(x)
    n, c, spatial = shape[0], shape[1], prod(shape[2:])
    size = int_attr(node, "size", 1)
    before, after = (size - 1) // 2, size // 2
    scale = float_literal(float_attr(node, "alpha", 1e-4) / size)
    beta = float_literal(float_attr(node, "beta", 0.75))
    bias = float_literal(float_attr(node, "bias", 1.0))
    code = Code()
    with code.loops((n, c), prefix="i") as (b, ch):
        code.line(f"const int64_t first = {ch} < {before} ? 0 : {ch} - {before};")
        code.line(f"const int64_t last = {ch} + {after} < {c} ? {ch} + {after} : {c - 1};")
        code.line(f"const float *x = X + ({b} * {c} + {ch}) * {spatial};")
        code.line(f"float *y = Y + ({b} * {c} + {ch}) * {spatial};")
        code.line(f"for (int64_t j = 0; j < {spatial}; ++j) y[j] = 0.0f;")
        with code.block("for (int64_t k = first; k <= last; ++k)"):
            code.line(f"const float *xk = X + ({b} * {c} + k) * {spatial};")
            code.line(f"for (int64_t j = 0; j < {spatial}; ++j) y[j] += xk[j] * xk[j];")
        code.line(
            f"for (int64_t j = 0; j < {spatial}; ++j) "
            f"y[j] = x[j] / powf({bias} + {scale} * y[j], {beta});"
        )
    return _kernel(nodes, [Param("X", x, "float"), Param("Y", y, "float", True)], code)


def _lower_rmsnorm(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """y = x / sqrt(mean(x^2) + epsilon) * scale over the dims from `axis` on."""
    node = nodes[0]
    x, scale, y = node.inputs[0], node.inputs[1], node.outputs[0]
    shape = ctx.shape(x)
    axis = normalize_axis(int_attr(node, "axis", -1), len(shape))
    outer, n = prod(shape[:axis]), prod(shape[axis:])
    eps = float_literal(float_attr(node, "epsilon", 1e-5))
    s_idx = "j" if ctx.graph.type_of(scale).numel == n else "0"
    code = Code()
    with code.block(f"for (int64_t o = 0; o < {outer}; ++o)"):
        code.line(f"const float *x = X + o * {n};")
        code.line(f"float *y = Y + o * {n};")
        code.line("float squares = 0.0f;")
        code.line(f"for (int64_t j = 0; j < {n}; ++j) squares += x[j] * x[j];")
        code.line(f"const float inv = 1.0f / sqrtf(squares / {n}.0f + {eps});")
        code.line(f"for (int64_t j = 0; j < {n}; ++j) y[j] = x[j] * inv * S[{s_idx}];")
    params = [Param("X", x, "float"), Param("S", scale, "float"), Param("Y", y, "float", True)]
    return _kernel(nodes, params, code)


def _lower_lpnorm(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    """y = x / ||x||_p along `axis` (p is 1 or 2)."""
    node = nodes[0]
    x, y = node.inputs[0], node.outputs[0]
    shape = ctx.shape(x)
    axis = normalize_axis(int_attr(node, "axis", -1), len(shape))
    outer, n, inner = prod(shape[:axis]), shape[axis], prod(shape[axis + 1 :])
    term = "fabsf(x[{at}])" if int_attr(node, "p", 2) == 1 else "x[{at}] * x[{at}]"
    norm = "sum" if int_attr(node, "p", 2) == 1 else "sqrtf(sum)"
    code = Code()
    with lanes(code, outer, n, inner) as at:
        code.line("float sum = 0.0f;")
        code.line(f"for (int64_t j = 0; j < {n}; ++j) sum += {term.format(at=at)};")
        code.line(f"const float norm = {norm};")
        # a zero lane stays zero (not 0/0), as in the reference
        code.line(
            f"for (int64_t j = 0; j < {n}; ++j) y[{at}] = norm == 0.0f ? 0.0f : x[{at}] / norm;"
        )
    return _kernel(nodes, [Param("X", x, "float"), Param("Y", y, "float", True)], code)


def _check_batchnorm(node: Node, graph: Graph) -> str | None:
    # Before opset 14 extra outputs meant training (with saved_mean/saved_var outputs too);
    # from 14 on, training_mode says so and the outputs are the running statistics.
    if graph.opset < 14 and len(present(node.outputs)) > 1:
        return "BatchNormalization with statistics outputs before opset 14 not supported"
    if len(present(node.outputs)) > 1 and not int_attr(node, "training_mode", 0):
        return "BatchNormalization with statistics outputs outside training mode not supported"
    if graph.type_of(node.inputs[0]).rank < 2:
        return "BatchNormalization of a tensor with rank < 2 not supported"
    return float_reason(node, graph)


def _check_lrn(node: Node, graph: Graph) -> str | None:
    if graph.type_of(node.inputs[0]).rank < 2:
        return "LRN of a tensor with rank < 2 not supported"
    if int_attr(node, "size", 0) < 1:
        return "LRN without a positive 'size' not supported"
    return float_reason(node, graph)


def _check_layernorm(node: Node, graph: Graph) -> str | None:
    shape = graph.type_of(node.inputs[0]).shape
    axis = normalize_axis(int_attr(node, "axis", -1), len(shape))
    n = prod(shape[axis:])
    for t in present(node.inputs[1:3]):
        if graph.type_of(t).numel not in (1, n):
            return (
                f"LayerNormalization with scale/bias shape {graph.type_of(t).shape} not supported"
            )
    return float_reason(node, graph)


def _check_groupnorm(node: Node, graph: Graph) -> str | None:
    shape = graph.type_of(node.inputs[0]).shape
    groups = int_attr(node, "num_groups", 0)
    if len(shape) < 3 or groups < 1 or shape[1] % groups:
        return f"GroupNormalization of shape {shape} in {groups} groups not supported"
    return float_reason(node, graph)


def _check_rmsnorm(node: Node, graph: Graph) -> str | None:
    shape = graph.type_of(node.inputs[0]).shape
    axis = normalize_axis(int_attr(node, "axis", -1), len(shape))
    if graph.type_of(node.inputs[1]).numel not in (1, prod(shape[axis:])):
        shape = graph.type_of(node.inputs[1]).shape
        return f"RMSNormalization with scale shape {shape} not supported"
    return float_reason(node, graph)


def _check_lpnorm(node: Node, graph: Graph) -> str | None:
    if int_attr(node, "p", 2) not in (1, 2):
        return f"LpNormalization with p={int_attr(node, 'p', 2)} not supported (1 or 2 only)"
    return float_reason(node, graph)


def _check_instancenorm(node: Node, graph: Graph) -> str | None:
    if graph.type_of(node.inputs[0]).rank < 3:
        return "InstanceNormalization of a tensor with rank < 3 not supported"
    return float_reason(node, graph)


ENTRIES = (
    OpEntry("BatchNormalization", "kernel", _check_batchnorm, lower=_lower_batchnorm),
    OpEntry("LayerNormalization", "kernel", _check_layernorm, lower=_lower_layernorm),
    OpEntry("InstanceNormalization", "kernel", _check_instancenorm, lower=_lower_instancenorm),
    OpEntry("LRN", "kernel", _check_lrn, lower=_lower_lrn),
    OpEntry("GroupNormalization", "kernel", _check_groupnorm, lower=_lower_groupnorm),
    OpEntry("MeanVarianceNormalization", "kernel", float_reason, lower=_lower_mvn),
    OpEntry("RMSNormalization", "kernel", _check_rmsnorm, lower=_lower_rmsnorm),
    OpEntry("LpNormalization", "kernel", _check_lpnorm, lower=_lower_lpnorm),
)
