"""A tiny, dumb writer for CMake code: it quotes and formats, nothing else.

Every value is written as a quoted argument ("..."), in which `\\`, `"` and `$` are
escaped, so a path such as `my $models` reaches CMake unchanged and no `${...}` in it is
ever expanded. What cannot survive the trip through CMake's argument lists is rejected
rather than silently mangled: `;` (CMake's list separator would split the value in two),
line breaks, `$<` (CMake would read a generator expression) and the empty string (dropped
when a list is expanded).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from buildgen.errors import BuildgenError, Diagnostic

_INDENT = "  "
_WIDTH = 100


def quote(text: str) -> str:
    """`text` as one quoted CMake argument."""
    problem = None
    if not text:
        problem = "is empty"
    elif "\n" in text or "\r" in text:
        problem = "contains a line break"
    elif ";" in text:
        problem = "contains ';', CMake's list separator"
    elif "$<" in text:
        problem = "contains '$<', which CMake reads as a generator expression"
    if problem is not None:
        raise BuildgenError(
            Diagnostic(
                f"{text!r} {problem}, so it cannot be passed through CMake",
                hint="rename the file or folder, or drop the flag",
            )
        )
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


Section = tuple[str, Sequence[str]]  # a keyword and its values


class CMakeWriter:
    """Accumulates lines; the caller decides the order."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"

    def newline(self) -> None:
        self._lines.append("")

    def comment(self, text: str) -> None:
        for line in text.splitlines():
            self._lines.append(f"# {line}".rstrip())

    def raw(self, line: str) -> None:
        """A line of CMake written by buildgen itself (a policy setting, a fixed call)."""
        self._lines.append(line)

    def call(
        self, command: str, first: Iterable[str] = (), sections: Iterable[Section] = ()
    ) -> None:
        """`command(<first...>` then one line per keyword section, values quoted.

        A section whose values are empty is left out: CMake's argument parsers treat a
        missing keyword and an empty one alike.
        """
        head = command + "(" + " ".join(quote(v) for v in first)
        body: list[str] = []
        for keyword, values in sections:
            if values:
                body += _section(keyword, [quote(v) for v in values])
        if not body:
            self._lines.append(head + ")")
            return
        self._lines.append(head)
        self._lines += body
        self._lines.append(")")


def _section(keyword: str, quoted: list[str]) -> list[str]:
    """`KEYWORD v1 v2` on one line if it fits, else the values packed under the keyword."""
    one_line = f"{_INDENT}{keyword} {' '.join(quoted)}"
    if len(one_line) <= _WIDTH:
        return [one_line]
    lines = [f"{_INDENT}{keyword}"]
    current = ""
    for value in quoted:
        if current and len(_INDENT * 2) + len(current) + 1 + len(value) > _WIDTH:
            lines.append(_INDENT * 2 + current)
            current = value
        else:
            current = f"{current} {value}" if current else value
    lines.append(_INDENT * 2 + current)
    return lines
