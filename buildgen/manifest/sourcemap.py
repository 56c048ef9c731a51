"""Where each part of a manifest came from, so any stage can point the user at it.

A *path* is a tuple of mapping keys and list indices from the document root, e.g.
``("models", "mlp", "inputs", "x")``. Values and mapping keys are located separately:
"unknown key" and "duplicate key" point at the key, "expected …, got …" at the value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from buildgen.errors import Diagnostic, SourceLocation

NodePath = tuple[str | int, ...]

# Keys that read well after a dot; anything else (node names such as "/layer3/MatMul",
# keys with spaces or dots) is written as ["..."] so the path stays unambiguous.
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def format_path(path: NodePath) -> str:
    """``("models", "mlp", "targets", 0)`` -> ``models.mlp.targets[0]``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(part)}]"
    return text


# A position as the loader records it: 1-based (line, column).
Position = tuple[int, int]


class Positions(Mapping[NodePath, SourceLocation]):
    """Read-only path -> SourceLocation over (line, column) pairs of one file.

    A manifest holds a position for every value and key (tens of thousands at 1,000
    models) and a message looks up a handful: the loader stores plain pairs and a
    SourceLocation is made only when one is asked for."""

    def __init__(self, file: str, positions: dict[NodePath, Position]):
        self._file = file
        self._positions = positions

    def __getitem__(self, path: NodePath) -> SourceLocation:
        line, column = self._positions[path]
        return SourceLocation(self._file, line, column)

    def __iter__(self) -> Iterator[NodePath]:
        return iter(self._positions)

    def __len__(self) -> int:
        return len(self._positions)


@dataclass(frozen=True)
class SourceMap:
    """Positions of the values and keys of one YAML document, plus its text lines."""

    file: str  # the file name as shown in messages
    lines: tuple[str, ...]
    values: Mapping[NodePath, SourceLocation]
    keys: Mapping[NodePath, SourceLocation]

    def locate(self, path: NodePath) -> SourceLocation | None:
        """The start of the value at ``path``; the nearest located ancestor if it has none."""
        for end in range(len(path), -1, -1):
            found = self.values.get(path[:end])
            if found is not None:
                return found
        return None

    def locate_key(self, path: NodePath) -> SourceLocation | None:
        """The key (or list item) that introduces ``path``; falls back to its value."""
        return self.keys.get(path) or self.locate(path)

    def source_line(self, location: SourceLocation | None) -> str | None:
        if location is None or not 1 <= location.line <= len(self.lines):
            return None
        return self.lines[location.line - 1]

    def diagnostic(
        self,
        path: NodePath,
        message: str,
        hint: str | None = None,
        *,
        at_key: bool = False,
        at: NodePath | None = None,
    ) -> Diagnostic:
        """``<dotted path>: <message>``, located at the value of ``path`` (or of ``at``),
        or at the key that introduces it when ``at_key`` is set."""
        where = path if at is None else at
        location = self.locate_key(where) if at_key else self.locate(where)
        text = f"{format_path(path)}: {message}" if path else message
        return Diagnostic(text, location, hint, self.source_line(location))


def sort_diagnostics(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """Drop exact repeats and order by position (unlocated ones last), as a compiler would."""
    unique = list(dict.fromkeys(diagnostics))

    def key(d: Diagnostic) -> tuple[int, int, int, str]:
        if d.location is None:
            return (1, 0, 0, d.message)
        return (0, d.location.line, d.location.column, d.message)

    return sorted(unique, key=key)
