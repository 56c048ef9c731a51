"""Refusing names no real model has: a model is data, and its names must stay data.

Tensor, node and graph names reach generated C, reports, logs and terminals. The emitters
escape whatever they get (buildgen/codegen/cnames.py), so this check is the second line:
names with characters that change how text *reads* — control characters (a newline ends a
comment, ESC drives a terminal), Unicode bidi controls (a "Trojan Source" reordering, CVE-
2021-42574), line/paragraph separators, lone surrogates — or that are absurdly long are
refused at import with the model, the name and the character, before any file is written.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import error
from buildgen.importer.subgraphs import subgraphs

if TYPE_CHECKING:
    import onnx

# The bidi embedding, override and isolate controls and the implicit marks.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# A name longer than this is not a name; real ones are well under 1 kB. Generated code
# shortens long names anyway (cnames.MAX_IDENTIFIER), so this only bounds memory and logs.
MAX_NAME_CHARS = 16384


def check_names(graph: onnx.GraphProto, path: Path, model: str) -> None:
    """Raise a located error for the first name in `graph` (and its subgraphs) that
    carries a forbidden character or is longer than MAX_NAME_CHARS."""
    for what, name in _names(graph):
        problem = name_problem(name)
        if problem is not None:
            raise error(
                f"{path}: model '{model}': {what} {_shown(name)} {problem}",
                hint="rename it in the exporter (a model's names must be printable text)",
            )


def name_problem(name: str) -> str | None:
    if len(name) > MAX_NAME_CHARS:
        return f"is {len(name)} characters long (at most {MAX_NAME_CHARS})"
    for index, ch in enumerate(name):
        kind = _forbidden(ch)
        if kind is not None:
            return f"has {kind} U+{ord(ch):04X} {_char_name(ch)} at position {index}"
    return None


def _forbidden(ch: str) -> str | None:
    category = unicodedata.category(ch)
    if category == "Cc":
        return "the control character"
    if ch in _BIDI:
        return "the bidirectional control"
    if category in ("Zl", "Zp"):
        return "the line separator"
    if category == "Cs":
        return "the lone surrogate"
    return None


_CONTROL_NAMES = {"\0": "(NUL)", "\t": "(tab)", "\n": "(line feed)", "\r": "(carriage return)",
                  "\x1b": "(escape)", "\x7f": "(delete)"}


def _char_name(ch: str) -> str:
    return _CONTROL_NAMES.get(ch) or f"({unicodedata.name(ch, 'unnamed').lower()})"


def _shown(name: str) -> str:
    """The name as printable ASCII (the message itself must not carry the character)."""
    from buildgen.codegen.cnames import printable

    return f"'{printable(name, 80)}'"


def _names(graph: onnx.GraphProto) -> Iterator[tuple[str, str]]:
    yield "graph name", graph.name
    for group, what in (
        (graph.input, "input"),
        (graph.output, "output"),
        (graph.value_info, "tensor"),
        (graph.initializer, "initializer"),
    ):
        for item in group:
            yield what, item.name
    for node in graph.node:
        yield "node name", node.name
        for tensor in (*node.input, *node.output):
            yield f"tensor of node '{_shown(node.name)[1:-1]}'", tensor
        for attribute in node.attribute:
            yield f"attribute of node '{_shown(node.name)[1:-1]}'", attribute.name
        for graph in subgraphs(node):
            yield from _names(graph)


def unique_name(base: str, taken: set[str]) -> str:
    """`base`, or `base_1`, `base_2`... whichever `taken` lacks first; it is taken then."""
    name, suffix = base, 1
    while name in taken:
        name, suffix = f"{base}_{suffix}", suffix + 1
    taken.add(name)
    return name
