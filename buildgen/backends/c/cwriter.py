"""Small helpers that format C text: literals, index expressions, indented blocks, names.

Nothing here knows about ONNX ops; the emitters in ops/ use these so every kernel is
written in the same style (int64_t loop counters, constant bounds and strides).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from buildgen.codegen import cnames
from buildgen.ir import DType

C_KEYWORDS = frozenset(
    (
        "auto",
        "break",
        "case",
        "char",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "register",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
        "_Bool",
        "_Complex",
        "_Imaginary",
        "_Alignas",
        "_Alignof",
        "_Atomic",
        "_Generic",
        "_Noreturn",
        "_Static_assert",
        "_Thread_local",
    )
)


class Code:
    """Lines of C with indentation managed by `block`."""

    def __init__(self, indent: int = 1) -> None:
        self._lines: list[str] = []
        self._indent = indent

    def line(self, text: str = "") -> None:
        self._lines.append(("    " * self._indent + text) if text else "")

    def extend(self, lines: Sequence[str]) -> None:
        for text in lines:
            self.line(text)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.line(header + " {")
        self._indent += 1
        yield
        self._indent -= 1
        self.line("}")

    @contextmanager
    def loops(self, extents: Sequence[int], prefix: str = "i", split: bool = False
              ) -> Iterator[list[str]]:
        """Nested for loops over constant extents; yields the counter names, outermost first.
        split: the outermost loop runs over [lo, hi) instead (a split kernel's rows)."""
        names = [f"{prefix}{d}" for d in range(len(extents))]
        for d, (name, extent) in enumerate(zip(names, extents, strict=True)):
            start, end = ("lo", "hi") if split and d == 0 else ("0", str(extent))
            self.line(f"for (int64_t {name} = {start}; {name} < {end}; ++{name}) {{")
            self._indent += 1
        yield names
        for _ in extents:
            self._indent -= 1
            self.line("}")

    @property
    def lines(self) -> tuple[str, ...]:
        return tuple(self._lines)


def signature(ret: str, name: str, params: Sequence[str]) -> list[str]:
    """A C function header: on one line when it fits in 100 columns, else one parameter per
    line."""
    one_line = f"{ret} {name}({', '.join(params) or 'void'})"
    if len(one_line) <= 100:
        return [one_line]
    return [f"{ret} {name}(", *(f"    {p}," for p in params[:-1]), f"    {params[-1]})"]


def linear(names: Sequence[str], strides: Sequence[int], base: int = 0) -> str:
    """`i0 * 96 + i1 * 3 + 5`: an index from loop counters and constant strides."""
    terms = [n if s == 1 else f"{n} * {s}" for n, s in zip(names, strides, strict=True) if s != 0]
    if base:
        terms.append(str(base))
    if not terms:
        return "0"
    return " + ".join(terms).replace("+ -", "- ")


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    return tuple(strides)


def broadcast_strides(src: Sequence[int], dst: Sequence[int]) -> tuple[int, ...]:
    """Element strides of a contiguous `src` read at each index of `dst` (numpy broadcasting):
    0 along dims that `src` lacks or has as 1."""
    own = contiguous_strides(src)
    lead = len(dst) - len(src)
    return tuple(0 if d < lead or src[d - lead] == 1 else own[d - lead] for d in range(len(dst)))


def coalesce(
    shape: Sequence[int], strides: Sequence[Sequence[int]]
) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Drop extent-1 dims and merge neighbours that every operand walks as one dim, so a
    loop nest over (shape, strides) has as few and as long loops as possible."""
    merged: list[tuple[int, list[int]]] = []
    for d, extent in enumerate(shape):
        if extent == 1:
            continue
        ss = [s[d] for s in strides]
        if merged and all(ps == s * extent for ps, s in zip(merged[-1][1], ss, strict=True)):
            merged[-1] = (merged[-1][0] * extent, ss)
        else:
            merged.append((extent, ss))
    extents = tuple(e for e, _ in merged)
    per_operand = tuple(tuple(ss[k] for _, ss in merged) for k in range(len(strides)))
    return extents, per_operand


def float_literal(value: float) -> str:
    """The shortest C literal that reads back as the same float32."""
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    text = np.format_float_scientific(np.float32(value), unique=True, trim="-")
    mantissa, _, exponent = text.partition("e")
    exp = int(exponent)
    if -4 <= exp <= 7:
        text = np.format_float_positional(np.float32(value), unique=True, trim="-")
    else:
        text = f"{mantissa}e{exp}"
    if "." not in text and "e" not in text:
        text += ".0"
    return text + "f"


def int_literal(value: int, dtype: DType = DType.INT64) -> str:
    if dtype == DType.INT64 and not -(2**31) < value < 2**31:
        return f"INT64_C({value})" if value != -(2**63) else "INT64_MIN"
    return str(value)


def literal(value: float | int | bool, dtype: DType) -> str:
    if dtype == DType.FLOAT32:
        return float_literal(float(value))
    if dtype == DType.BOOL:
        return "1" if value else "0"
    return int_literal(int(value), dtype)


def shape_text(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def initializer_lines(fields: Sequence[tuple[str, object]], width: int = 96) -> list[str]:
    """A designated initializer `{.a = 1, .b = 2}` wrapped into lines of at most `width`."""
    lines, current = ["{"], "   "
    for name, value in fields:
        item = f" .{name} = {value},"
        if len(current) + len(item) > width:
            lines.append(current)
            current = "   "
        current += item
    lines.append(current.rstrip(","))
    lines.append("}")
    return lines


def comment(text: str) -> str:
    return cnames.comment(text)


_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]+")
# kernel functions (k12_conv), the kernel library (bg_), names C reserves (_X, __x)
_RESERVED_PREFIX = re.compile(r"k\d+_|bg_|BG_|_")


class Names:
    """Unique, readable C identifiers for ONNX tensor names within one function."""

    def __init__(self, reserved: Sequence[str] = ()) -> None:
        self._reserved = set(reserved) | C_KEYWORDS
        self._taken = set(self._reserved)
        self._by_tensor: dict[str, str] = {}

    def __call__(self, tensor: str) -> str:
        if tensor in self._by_tensor:
            return self._by_tensor[tensor]
        base = _NOT_IDENT.sub("_", tensor).strip("_") or "t"
        if len(base) > cnames.MAX_IDENTIFIER:
            base = f"{base[:cnames.MAX_IDENTIFIER]}_{cnames.digest(tensor)}"
        if base[0].isdigit() or _RESERVED_PREFIX.match(base) or base in self._reserved:
            base = "t_" + base
        name, n = base, 2
        while name in self._taken:
            name, n = f"{base}_{n}", n + 1
        self._taken.add(name)
        self._by_tensor[tensor] = name
        return name
