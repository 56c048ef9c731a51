"""Recurrent layers: LSTM, GRU and RNN in float32, one kernel per node.

Every variant of the ONNX spec: forward, reverse and bidirectional; layout 0 ([T, batch,
...]) and 1 ([batch, T, ...]); optional B, sequence_lens, initial_h, initial_c and P; LSTM
input_forget; GRU linear_before_reset; clip; the activations attribute with its alpha/beta;
any of the outputs Y, Y_h, Y_c left out.

Each direction runs in two parts. First one GEMM projects the inputs of every step at once,
xw = X · W^T + (Wb + Rb), into the workspace (the rows of X in their own order, so layout 1
needs no transpose). Then the steps run in order: one GEMM per step for H · R^T over the
whole batch, and a loop over the hidden units that applies the gates. This module reads the
node and plans the kernel (workspace, directions, outputs); recurrent_cell.py writes each
direction's code.

sequence_lens is read at run time and behaves as in onnxruntime: sequence b runs for its
first len[b] steps (a reverse direction starts at step len[b] - 1), Y is zero from step
len[b] on, Y_h / Y_c hold the state after the last step, and a sequence of length 0 has
zero Y_h and Y_c. A length outside [0, T] fails the call. The activations' alpha and beta
are consumed in the order of the activations, only by those that take them, with
onnxruntime's defaults (LeakyRelu 0.01, HardSigmoid 0.2 / 0.5, Elu 1.0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from buildgen.backends.c.cwriter import Code
from buildgen.backends.c.fused import kernel_stem
from buildgen.backends.c.kernel import POOL, Kernel, LowerContext, Param
from buildgen.backends.c.ops.common import (
    FLOAT,
    INTS,
    dtype_reason,
    input_at,
    int_attr,
    present,
    str_attr,
)
from buildgen.backends.c.ops.recurrent_cell import Activation, Cell, Dims
from buildgen.backends.c.registry import OpEntry
from buildgen.backends.c.workspace import sgemm_workspace_bytes
from buildgen.ir import Graph, Node

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULT_ACTIVATIONS = {
    "LSTM": ("Sigmoid", "Tanh", "Tanh"),  # f (gates), g (cell input), h (cell output)
    "GRU": ("Sigmoid", "Tanh"),  # f (gates), g (hidden)
    "RNN": ("Tanh",),
}
# lower-case name -> (takes alpha, takes beta, default alpha, default beta), as onnxruntime
# reads activation_alpha / activation_beta
_ACTIVATION_ARGS: dict[str, tuple[bool, bool, float, float]] = {
    "sigmoid": (False, False, 0.0, 0.0),
    "tanh": (False, False, 0.0, 0.0),
    "relu": (False, False, 0.0, 0.0),
    "affine": (True, True, 0.0, 0.0),
    "leakyrelu": (True, False, 0.01, 0.0),
    "thresholdedrelu": (True, False, 0.0, 0.0),
    "scaledtanh": (True, True, 0.0, 0.0),
    "hardsigmoid": (True, True, 0.2, 0.5),
    "elu": (True, False, 1.0, 0.0),
    "softsign": (False, False, 0.0, 0.0),
    "softplus": (False, False, 0.0, 0.0),
}
_DIRECTIONS = ("forward", "reverse", "bidirectional")
# input indices of the optional inputs
_B, _LENS, _H0, _C0, _P = 3, 4, 5, 6, 7


def activations(node: Node, directions: int) -> tuple[tuple[Activation, ...], ...] | str:
    """The activation functions of each direction, or why they are not supported."""
    per_direction = len(DEFAULT_ACTIVATIONS[node.op])
    names = node.attr("activations")
    if names is None:
        names = DEFAULT_ACTIVATIONS[node.op] * directions
    assert isinstance(names, tuple)
    names = tuple(str(n) for n in names)
    if node.op == "RNN" and directions == 1 and len(names) == 2:
        names = names[:1]  # the old RNN default ("Tanh", "Tanh"); onnxruntime takes the first
    if len(names) != per_direction * directions:
        return (
            f"{node.op} activations {list(names)}: expected {per_direction * directions} "
            f"names ({per_direction} per direction)"
        )
    alphas = [float(v) for v in _floats(node, "activation_alpha")]
    betas = [float(v) for v in _floats(node, "activation_beta")]
    parsed = []
    for name in names:
        args = _ACTIVATION_ARGS.get(name.lower())
        if args is None:
            return f"{node.op} activations: '{name}' not supported"
        takes_alpha, takes_beta, alpha, beta = args
        if takes_alpha and alphas:
            alpha = alphas.pop(0)
        if takes_beta and betas:
            beta = betas.pop(0)
        parsed.append(Activation(name.lower(), alpha, beta))
    return tuple(
        tuple(parsed[d * per_direction : (d + 1) * per_direction]) for d in range(directions)
    )


def _floats(node: Node, name: str) -> tuple[float, ...]:
    value = node.attr(name, ())
    assert isinstance(value, tuple)
    return tuple(float(v) for v in value)


def _dims(node: Node, graph: Graph) -> Dims:
    x_shape = graph.type_of(node.inputs[0]).shape
    w_shape = graph.type_of(node.inputs[1]).shape
    r_shape = graph.type_of(node.inputs[2]).shape
    layout = int_attr(node, "layout", 0)
    steps, batch = (x_shape[0], x_shape[1]) if layout == 0 else (x_shape[1], x_shape[0])
    return Dims(steps, batch, x_shape[2], r_shape[2], w_shape[0], GATES[node.op], layout)


def output_at(node: Node, index: int) -> str:
    return node.outputs[index] if index < len(node.outputs) else ""


@dataclass(frozen=True)
class _Buffers:
    """The workspace carved into float buffers (offsets in floats), then bg_sgemm's."""

    lines: tuple[tuple[str, int, str], ...]  # (name, floats, what it holds)

    @property
    def floats(self) -> int:
        return sum(size for _, size, _ in self.lines)

    def declare(self, code: Code) -> None:
        previous = ""
        for name, size, what in self.lines:
            start = previous if previous else "(float *)ws"
            code.line(f"float *{name} = {start}; /* {what} */")
            previous = f"{name} + {size}"
        code.line(f"void *gemm_ws = {previous};")


def _lower(ctx: LowerContext, nodes: Sequence[Node]) -> Kernel:
    node = nodes[0]
    dims = _dims(node, ctx.graph)
    acts = activations(node, dims.directions)
    assert not isinstance(acts, str)
    direction = str_attr(node, "direction", "forward")
    t, b, i, h, gh = dims.steps, dims.batch, dims.inputs, dims.hidden, dims.gh
    lbr = node.op == "GRU" and int_attr(node, "linear_before_reset", 0) != 0
    bias, lens = input_at(node, _B), input_at(node, _LENS)
    h0 = input_at(node, _H0)
    c0 = input_at(node, _C0) if node.op == "LSTM" else ""
    peep = input_at(node, _P) if node.op == "LSTM" else ""
    y, yh = output_at(node, 0), output_at(node, 1)
    yc = output_at(node, 2) if node.op == "LSTM" else ""

    buffers = [
        ("xw", t * b * gh, f"[{t * b}, {gh}]: X · W^T + biases, every step"),
        ("hr", b * gh, f"[{b}, {gh}]: H · R^T of one step"),
        ("h", b * h, f"[{b}, {h}]: hidden state"),
    ]
    if node.op == "LSTM":
        buffers.append(("c", b * h, f"[{b}, {h}]: cell state"))
    if node.op == "GRU" and not lbr:
        buffers.append(("rh", b * h, f"[{b}, {h}]: r (.) H, the input of Rh"))
    if bias:
        buffers.append(("bias", gh, f"[{gh}]: the biases folded into xw"))
    workspace = _Buffers(tuple(buffers))
    gemms = [(t * b, gh, i)]
    gemms += [(b, 2 * h, h), (b, h, h)] if node.op == "GRU" and not lbr else [(b, gh, h)]

    code = Code()
    code.line(
        f"/* {node.op}: {dims.directions} direction(s), {t} steps, batch {b}, input {i}, "
        f"hidden {h}, layout {dims.layout} */"
    )
    if lens:
        code.line(f"int64_t len[{b}]; /* steps of each sequence */")
        with code.block(f"for (int64_t b = 0; b < {b}; ++b)"):
            code.line("len[b] = (int64_t)L[b];")
            code.line(f"if (len[b] < 0 || len[b] > {t}) return 1;")
    workspace.declare(code)
    if bias:
        code.line("const bg_epilogue ep = {.bias = bias};")
    names = ("forward", "reverse")
    for d in range(dims.directions):
        reverse = direction == "reverse" or d == 1
        code.line(f"/* direction {d}: {names[reverse]} */")
        cell = Cell(node, dims, d, acts[d], lbr, bool(lens), bool(bias), bool(peep))
        cell.project(code)
        cell.initial_state(code, "h", h0)
        if node.op == "LSTM":
            cell.initial_state(code, "c", c0)
        cell.steps(code, reverse, y)
        for state, out in (("h", yh), ("c", yc)):
            if out:
                cell.final_state(code, state, "Yh" if state == "h" else "Yc")
    if lens:
        code.line("return 0;")

    params = [
        Param("X", node.inputs[0], "float"),
        Param("W", node.inputs[1], "float"),
        Param("R", node.inputs[2], "float"),
    ]
    if bias:
        params.append(Param("Bias", bias, "float"))
    if lens:
        params.append(Param("L", lens, ctx.dtype(lens).c_type))
    for name, tensor in (("H0", h0), ("C0", c0), ("P", peep)):
        if tensor:
            params.append(Param(name, tensor, "float"))
    for name, tensor in (("Y", y), ("Yh", yh), ("Yc", yc)):
        if tensor:
            params.append(Param(name, tensor, "float", is_output=True))
    params += [Param("ws", "", "void"), POOL]
    float_bytes = workspace.floats * 4
    return Kernel(
        kernel_stem(nodes),
        tuple(nodes),
        tuple(params),
        code.lines,
        workspace=float_bytes + max(sgemm_workspace_bytes(*g) for g in gemms),
        workspace_check=f"{float_bytes} + {_max_expr(gemms)}",
        fallible=bool(lens),
        error_message=f"{node.op} '{node.name}': a sequence_lens value is outside [0, {t}]",
    )


def _max_expr(gemms: Sequence[tuple[int, int, int]]) -> str:
    """A C expression for the largest bg_sgemm_workspace_bytes of `gemms`."""
    exprs = sorted({f"bg_sgemm_workspace_bytes({m}, {n}, {k})" for m, n, k in gemms})
    result = exprs[0]
    for expr in exprs[1:]:
        result = f"({expr} > {result} ? {expr} : {result})"
    return result


def _check(node: Node, graph: Graph) -> str | None:
    op = node.op
    if node.has_attr("output_sequence"):
        return f"{op} with the output_sequence attribute (opset 1) not supported"
    direction = str_attr(node, "direction", "forward")
    if direction not in _DIRECTIONS:
        return f"{op} direction '{direction}' not supported"
    layout = int_attr(node, "layout", 0)
    if layout not in (0, 1):
        return f"{op} layout {layout} not supported"
    floats = [t for k, t in enumerate(node.inputs) if k != _LENS]
    reason = dtype_reason(node, graph, FLOAT, [*floats, *node.outputs])
    if reason:
        return reason
    lens = input_at(node, _LENS)
    if lens:
        reason = dtype_reason(node, graph, INTS, [lens])
        if reason:
            return reason
    for name, tensor in zip("XWR", node.inputs[:3], strict=True):
        if graph.type_of(tensor).rank != 3:
            return f"{op} with {name} of rank {graph.type_of(tensor).rank} not supported"
    dims = _dims(node, graph)
    expected = 2 if direction == "bidirectional" else 1
    if dims.directions != expected:
        return f"{op} direction '{direction}' with W for {dims.directions} direction(s)"
    hidden_size = node.attr("hidden_size")
    if hidden_size is not None and hidden_size != dims.hidden:
        return f"{op} hidden_size {hidden_size} disagrees with R's shape"
    acts = activations(node, dims.directions)
    if isinstance(acts, str):
        return acts
    for tensor in present(node.inputs):
        if graph.type_of(tensor).numel == 0:
            return f"{op} with the empty tensor '{tensor}' not supported"
    return None


ENTRIES = (
    OpEntry("LSTM", "kernel", _check, lower=_lower),
    OpEntry("GRU", "kernel", _check, lower=_lower),
    OpEntry("RNN", "kernel", _check, lower=_lower),
)
