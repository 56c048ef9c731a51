"""Recurrent layers: LSTM, GRU and RNN in float32, one kernel per node.

Every variant of the ONNX spec: forward, reverse and bidirectional; layout 0 ([T, batch,
...]) and 1 ([batch, T, ...]); optional B, sequence_lens, initial_h, initial_c and P; LSTM
input_forget; GRU linear_before_reset; clip; the activations attribute with its alpha/beta;
any of the outputs Y, Y_h, Y_c left out.

Each direction runs in two parts. First one GEMM projects the inputs of every step at once,
xw = X · W^T + (Wb + Rb), into the workspace (the rows of X in their own order, so layout 1
needs no transpose). Then the steps run in order: one GEMM per step for H · R^T over the
whole batch, and a loop over the hidden units that applies the gates.

sequence_lens is read at run time and behaves as in onnxruntime: sequence b runs for its
first len[b] steps (a reverse direction starts at step len[b] - 1), Y is zero from step
len[b] on, Y_h / Y_c hold the state after the last step, and a sequence of length 0 has
zero Y_h and Y_c. A length outside [0, T] fails the call. The activations' alpha and beta
are consumed in the order of the activations, only by those that take them, with
onnxruntime's defaults (LeakyRelu 0.01, HardSigmoid 0.2 / 0.5, Elu 1.0).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from buildgen.backends.c.cwriter import Code, float_literal, linear
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
GATE_NAMES = {"LSTM": "i, o, f, c", "GRU": "z, r, h", "RNN": ""}  # in ONNX order
# input indices of the optional inputs
_B, _LENS, _H0, _C0, _P = 3, 4, 5, 6, 7


@dataclass(frozen=True)
class Activation:
    name: str  # lower case, a key of _ACTIVATION_ARGS
    alpha: float = 0.0
    beta: float = 0.0

    def apply(self, v: str) -> str:
        """The C expression of the activation of the variable `v`."""
        a, b = float_literal(self.alpha), float_literal(self.beta)
        return {
            "sigmoid": f"bg_sigmoidf({v})",
            "tanh": f"bg_tanhf({v})",
            "relu": f"({v} > 0.0f ? {v} : 0.0f)",
            "affine": f"{a} * {v} + {b}",
            "leakyrelu": f"({v} >= 0.0f ? {v} : {a} * {v})",
            "thresholdedrelu": f"({v} > {a} ? {v} : 0.0f)",
            "scaledtanh": f"{a} * bg_tanhf({b} * {v})",
            "hardsigmoid": f"bg_hardsigmoidf({v}, {a}, {b})",
            "elu": f"({v} >= 0.0f ? {v} : {a} * (bg_expf({v}) - 1.0f))",
            "softsign": f"{v} / (1.0f + fabsf({v}))",
            "softplus": f"logf(1.0f + bg_expf({v}))",
        }[self.name]


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


@dataclass(frozen=True)
class Dims:
    steps: int  # T
    batch: int
    inputs: int
    hidden: int
    directions: int
    gates: int
    layout: int  # 0: [T, batch, ...], 1: [batch, T, ...]

    @property
    def gh(self) -> int:
        """Width of one row of gates: gates * hidden."""
        return self.gates * self.hidden

    def x_row(self, t: str, b: str) -> str:
        """Row of X (and of xw) holding step t of sequence b."""
        if self.layout == 0:
            return linear([t, b], [self.batch, 1])
        return linear([b, t], [self.steps, 1])

    def y_offset(self, t: str, d: int, b: str) -> str:
        """Offset of Y[t, d, b, 0] (layout 0) or Y[b, t, d, 0] (layout 1)."""
        h, n = self.hidden, self.directions
        if self.layout == 0:
            return linear([t, b], [n * self.batch * h, h], d * self.batch * h)
        return linear([b, t], [self.steps * n * h, n * h], d * h)

    def state_offset(self, d: int, b: str) -> str:
        """Offset of Y_h[d, b, 0] (layout 0) or Y_h[b, d, 0] (layout 1); also initial_h/c."""
        h = self.hidden
        if self.layout == 0:
            return linear([b], [h], d * self.batch * h)
        return linear([b], [self.directions * h], d * h)


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
        cell = _Cell(node, dims, d, acts[d], lbr, bool(lens), bool(bias), bool(peep))
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


@dataclass(frozen=True)
class _Cell:
    """Emits one direction of one node."""

    node: Node
    dims: Dims
    d: int
    acts: tuple[Activation, ...]
    lbr: bool  # GRU linear_before_reset
    has_lens: bool
    has_bias: bool
    has_peepholes: bool

    def project(self, code: Code) -> None:
        """xw = X · W^T + the biases that do not depend on the step."""
        dims, d = self.dims, self.d
        t, b, i, h, gh = dims.steps, dims.batch, dims.inputs, dims.hidden, dims.gh
        if self.has_bias:
            wb, rb = 2 * gh * d, 2 * gh * d + gh
            # GRU linear_before_reset keeps Rbh apart: it is added before r multiplies
            folded = 2 * h if self.lbr else gh
            code.line(
                f"for (int64_t j = 0; j < {folded}; ++j) "
                f"bias[j] = Bias[{linear(['j'], [1], wb)}] + Bias[{linear(['j'], [1], rb)}];"
            )
            if self.lbr:
                code.line(
                    f"for (int64_t j = {2 * h}; j < {gh}; ++j) "
                    f"bias[j] = Bias[{linear(['j'], [1], wb)}];"
                )
        w = _at("W", gh * i * d)
        code.line(
            f"bg_sgemm(0, 1, {t * b}, {gh}, {i}, 1.0f, X, {i}, {w}, {i}, 0.0f, xw, {gh}, "
            f"{'&ep' if self.has_bias else 'NULL'}, gemm_ws, pool);"
        )

    def initial_state(self, code: Code, state: str, given: str) -> None:
        dims = self.dims
        b, h = dims.batch, dims.hidden
        if not given:
            code.line(f"memset({state}, 0, {b * h * 4});")
        elif dims.layout == 0:
            source = "H0" if state == "h" else "C0"
            code.line(f"memcpy({state}, {_at(source, dims.batch * h * self.d)}, {b * h * 4});")
        else:
            source = "H0" if state == "h" else "C0"
            at = dims.state_offset(self.d, "b")
            code.line(
                f"for (int64_t b = 0; b < {b}; ++b) "
                f"memcpy({state} + {linear(['b'], [h])}, {source} + {at}, {h * 4});"
            )

    def steps(self, code: Code, reverse: bool, y: str) -> None:
        dims = self.dims
        t, b, h, gh = dims.steps, dims.batch, dims.hidden, dims.gh
        r = _at("R", gh * h * self.d)
        with code.block(f"for (int64_t s = 0; s < {t}; ++s)"):
            if not self.has_lens:
                code.line(f"const int64_t t = {f'{t - 1} - s' if reverse else 's'};")
            if self.node.op == "GRU" and not self.lbr:
                # r needs H · Rr^T first; (r (.) H) · Rh^T is a second product
                code.line(
                    f"bg_sgemm(0, 1, {b}, {2 * h}, {h}, 1.0f, h, {h}, {r}, {h}, 0.0f, hr, {gh}, "
                    "NULL, gemm_ws, pool);"
                )
                with self._batch_loop(code, reverse, y, ends_y=False):
                    f = self.acts[0]
                    code.line("/* the reset gate r, and r (.) H for the second product */")
                    with code.block(f"for (int64_t j = 0; j < {h}; ++j)"):
                        code.line(f"float r = gx[{h} + j] + gh[{h} + j];")
                        self._activate(code, "r", f)
                        code.line(f"rh[{linear(['b'], [h])} + j] = r * hb[j];")
                rh_r = _at("R", gh * h * self.d + 2 * h * h)
                code.line(
                    f"bg_sgemm(0, 1, {b}, {h}, {h}, 1.0f, rh, {h}, {rh_r}, {h}, 0.0f, "
                    f"hr + {2 * h}, {gh}, NULL, gemm_ws, pool);"
                )
            else:
                code.line(
                    f"bg_sgemm(0, 1, {b}, {gh}, {h}, 1.0f, h, {h}, {r}, {h}, 0.0f, hr, {gh}, "
                    "NULL, gemm_ws, pool);"
                )
            with self._batch_loop(code, reverse, y, ends_y=True):
                if y:
                    code.line(f"float *y = Y + {dims.y_offset('t', self.d, 'b')};")
                if GATE_NAMES[self.node.op]:
                    columns = ", ".join(str(k * h) for k in range(dims.gates))
                    code.line(
                        f"/* gates {GATE_NAMES[self.node.op]} at columns {columns} of gx, gh */"
                    )
                with code.block(f"for (int64_t j = 0; j < {h}; ++j)"):
                    {"LSTM": self._lstm, "GRU": self._gru, "RNN": self._rnn}[self.node.op](code)
                    if y:
                        code.line("y[j] = hb[j];")

    @contextmanager
    def _batch_loop(self, code: Code, reverse: bool, y: str, ends_y: bool) -> Iterator[None]:
        """The loop over the batch within one step, with gx (the row of xw), gh (of hr), hb
        (of h) and, for LSTM, cb (of c) declared. A sequence past its end is skipped; the
        loop that ends the step (`ends_y`) zeroes its row of Y."""
        dims, h = self.dims, self.dims.hidden
        with code.block(f"for (int64_t b = 0; b < {dims.batch}; ++b)"):
            if self.has_lens:
                with code.block("if (s >= len[b])"):
                    if ends_y and y:
                        code.line(f"memset(Y + {dims.y_offset('s', self.d, 'b')}, 0, {h * 4});")
                    elif not ends_y:
                        code.line(f"memset(rh + {linear(['b'], [h])}, 0, {h * 4});")
                    code.line("continue;")
                code.line(f"const int64_t t = {'len[b] - 1 - s' if reverse else 's'};")
            code.line(f"const float *gx = xw + ({dims.x_row('t', 'b')}) * {dims.gh};")
            code.line(f"const float *gh = hr + {linear(['b'], [dims.gh])};")
            code.line(f"float *hb = h + {linear(['b'], [h])};")
            if self.node.op == "LSTM":
                code.line(f"float *cb = c + {linear(['b'], [h])};")
            yield

    def _activate(self, code: Code, v: str, act: Activation) -> None:
        clip = self.node.attr("clip")
        if clip is not None:
            assert isinstance(clip, (int, float))
            c = float_literal(float(clip))
            code.line(f"{v} = bg_fminf(bg_fmaxf({v}, -{c}), {c});")
        code.line(f"{v} = {act.apply(v)};")

    def _lstm(self, code: Code) -> None:
        h = self.dims.hidden
        f_act, g_act, h_act = self.acts
        p = 3 * h * self.d
        peep = self.has_peepholes
        input_forget = int_attr(self.node, "input_forget", 0) != 0
        code.line("const float c_prev = cb[j];")
        # gates in ONNX order i, o, f, c; peepholes in order i, o, f
        code.line(f"float i = gx[j] + gh[j]{_peephole(peep, p, 'c_prev')};")
        self._activate(code, "i", f_act)
        if input_forget:
            code.line("const float f = 1.0f - i; /* input_forget */")
        else:
            forget = _peephole(peep, p + 2 * h, "c_prev")
            code.line(f"float f = gx[{2 * h} + j] + gh[{2 * h} + j]{forget};")
            self._activate(code, "f", f_act)
        code.line(f"float g = gx[{3 * h} + j] + gh[{3 * h} + j];")
        self._activate(code, "g", g_act)
        code.line("const float c_new = f * c_prev + i * g;")
        code.line(f"float o = gx[{h} + j] + gh[{h} + j]{_peephole(peep, p + h, 'c_new')};")
        self._activate(code, "o", f_act)
        code.line("cb[j] = c_new;")
        code.line(f"hb[j] = o * {h_act.apply('c_new')};")

    def _gru(self, code: Code) -> None:
        h = self.dims.hidden
        f_act, g_act = self.acts
        # gates in ONNX order z, r, h
        code.line("float z = gx[j] + gh[j];")
        self._activate(code, "z", f_act)
        if self.lbr:
            code.line(f"float r = gx[{h} + j] + gh[{h} + j];")
            self._activate(code, "r", f_act)
            rbh = f" + Bias[{linear(['j'], [1], 6 * h * self.d + 5 * h)}]" if self.has_bias else ""
            code.line(f"float n = gx[{2 * h} + j] + r * (gh[{2 * h} + j]{rbh});")
        else:
            code.line(f"float n = gx[{2 * h} + j] + gh[{2 * h} + j];")
        self._activate(code, "n", g_act)
        code.line("hb[j] = (1.0f - z) * n + z * hb[j];")

    def _rnn(self, code: Code) -> None:
        code.line("float v = gx[j] + gh[j];")
        self._activate(code, "v", self.acts[0])
        code.line("hb[j] = v;")

    def final_state(self, code: Code, state: str, out: str) -> None:
        dims = self.dims
        b, h = dims.batch, dims.hidden
        if not self.has_lens and dims.layout == 0:
            code.line(f"memcpy({_at(out, b * h * self.d)}, {state}, {b * h * 4});")
            return
        at = dims.state_offset(self.d, "b")
        with code.block(f"for (int64_t b = 0; b < {b}; ++b)"):
            row = f"{state} + {linear(['b'], [h])}"
            if self.has_lens:
                # a sequence of length 0 has no last step: its state output is zero
                code.line(f"if (len[b] == 0) memset({out} + {at}, 0, {h * 4});")
                code.line(f"else memcpy({out} + {at}, {row}, {h * 4});")
            else:
                code.line(f"memcpy({out} + {at}, {row}, {h * 4});")


def _peephole(enabled: bool, offset: int, cell: str) -> str:
    return f" + P[{linear(['j'], [1], offset)}] * {cell}" if enabled else ""


def _at(pointer: str, offset: int) -> str:
    return pointer if offset == 0 else f"{pointer} + {offset}"


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
