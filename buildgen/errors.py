"""The one error type users see. The CLI is the only place that prints it."""

from __future__ import annotations

import errno
from dataclasses import dataclass

from buildgen.term import severity


@dataclass(frozen=True)
class SourceLocation:
    """A 1-based line and column in a file the user wrote."""

    path: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Diagnostic:
    """One problem: where, what, and optionally how to fix it."""

    message: str
    location: SourceLocation | None = None
    hint: str | None = None
    source_line: str | None = None  # the offending line, shown with a caret

    def render(self, color: bool = False) -> str:
        """The text a user reads; `color`: the severity word in colour (buildgen.term)."""
        message = _shorten(self.message)
        word = severity("error", color)
        head = f"{self.location}: {word} {message}" if self.location else f"{word} {message}"
        lines = [head]
        if self.source_line is not None and self.location is not None:
            shown, caret = _window(self.source_line.rstrip("\n"), self.location.column - 1)
            lines.append("  " + shown)
            lines.append("  " + " " * caret + "^")
        if self.hint:
            lines.append(f"  hint: {_shorten(self.hint)}")
        return "\n".join(lines)


# A message quotes what the user wrote; a 10 MB key must not make a 20 MB error.
_MAX_TEXT = 1000
_MAX_LINE = 160


def _shorten(text: str) -> str:
    if len(text) <= _MAX_TEXT:
        return text
    half = _MAX_TEXT // 2
    return f"{text[:half]} ...[{len(text) - 2 * half:,} characters]... {text[-half:]}"


def _window(line: str, column: int) -> tuple[str, int]:
    """At most _MAX_LINE characters of `line` around `column`; the caret's new column."""
    if len(line) <= _MAX_LINE:
        return line, column
    start = max(0, min(column - _MAX_LINE // 2, len(line) - _MAX_LINE))
    prefix = "..." if start else ""
    suffix = "..." if start + _MAX_LINE < len(line) else ""
    return prefix + line[start:start + _MAX_LINE] + suffix, column - start + len(prefix)


class BuildgenError(Exception):
    """A user-facing error carrying one or more diagnostics."""

    def __init__(self, diagnostics: Diagnostic | list[Diagnostic] | str):
        if isinstance(diagnostics, str):
            diagnostics = Diagnostic(diagnostics)
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics: list[Diagnostic] = diagnostics
        super().__init__(self.render())

    def render(self, color: bool = False) -> str:
        return "\n".join(d.render(color) for d in self.diagnostics)


def error(
    message: str, location: SourceLocation | None = None, hint: str | None = None
) -> BuildgenError:
    return BuildgenError(Diagnostic(message, location, hint))


# Errors of the disk itself (full, over quota, failing, read-only): the machine's trouble,
# not a bug, so they are reported as errors rather than as internal ones.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})


def os_error(exc: OSError) -> BuildgenError:
    """`exc` as a user reads it: what failed, and on which file."""
    where = f": {exc.filename}" if exc.filename else ""
    return BuildgenError(f"{exc.strerror or exc}{where}")


def in_file(exc: BuildgenError, path: str) -> BuildgenError:
    """`exc` with each diagnostic that has no location and does not name `path` yet
    starting with `path: `, so an error from deep inside a stage says which model it is."""
    located = [
        d if d.location is not None or d.message.startswith(path)
        else Diagnostic(f"{path}: {d.message}", d.location, d.hint, d.source_line)
        for d in exc.diagnostics
    ]
    return BuildgenError(located)
