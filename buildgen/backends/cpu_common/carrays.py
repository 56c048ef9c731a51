"""Constant float arrays written into generated C (a folded BatchNormalization's per-channel
scale and shift, a scaled bias): one `static const float` array per use, values in full."""

from __future__ import annotations

from dataclasses import dataclass

from buildgen.backends.c.cwriter import float_literal


@dataclass(frozen=True)
class StaticArray:
    name: str
    values: tuple[float, ...]
    what: str  # the comment above it


def static_array_lines(array: StaticArray) -> list[str]:
    values = [float_literal(v) for v in array.values]
    lines = [f"/* {array.what} */", f"static const float {array.name}[{len(values)}] = {{"]
    for start in range(0, len(values), 8):
        lines.append("    " + ", ".join(values[start : start + 8]) + ",")
    lines.append("};")
    return lines
