"""One direction of one recurrent node (LSTM, GRU, RNN) as C: the projection of every
step's input, then the steps, each a GEMM and a loop over the hidden units applying the
gates (recurrent.py reads the node and plans the kernel around it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from buildgen.backends.c.cwriter import Code, float_literal, linear
from buildgen.backends.c.ops.common import int_attr
from buildgen.ir import Node

GATE_NAMES = {"LSTM": "i, o, f, c", "GRU": "z, r, h", "RNN": ""}  # in ONNX order


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


@dataclass(frozen=True)
class Cell:
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
