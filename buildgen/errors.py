"""The one error type users see. The CLI is the only place that prints it."""

from __future__ import annotations

from dataclasses import dataclass


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

    def render(self) -> str:
        head = (
            f"{self.location}: error: {self.message}" if self.location else f"error: {self.message}"
        )
        lines = [head]
        if self.source_line is not None and self.location is not None:
            lines.append("  " + self.source_line.rstrip("\n"))
            lines.append("  " + " " * (self.location.column - 1) + "^")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)


class BuildgenError(Exception):
    """A user-facing error carrying one or more diagnostics."""

    def __init__(self, diagnostics: Diagnostic | list[Diagnostic] | str):
        if isinstance(diagnostics, str):
            diagnostics = Diagnostic(diagnostics)
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics: list[Diagnostic] = diagnostics
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)


def error(
    message: str, location: SourceLocation | None = None, hint: str | None = None
) -> BuildgenError:
    return BuildgenError(Diagnostic(message, location, hint))
