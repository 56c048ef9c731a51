"""A tiny, dumb writer for .ninja files: it escapes and formats, nothing else.

Why not `ninja.ninja_syntax` from the ninja wheel: its escape_path() leaves a `$` that is
not followed by a space unescaped (a model under "my $models" would be read as the
variable `$models`), and it neither rejects `|` nor newlines in paths. Fixing that needs
our own escaping anyway, and the rest of it is a few lines.

Three kinds of text appear in a ninja file and each is escaped one way:
- paths in build/default lines: `$`, space and `:` are escaped (`escape_path`);
- literal values (descriptions, depfile names): only `$` is escaped (`escape_value`);
- command arguments: each is shell-quoted once with shlex.quote, then `$`-escaped
  (`quote_args`). Whether a value is an argument list is decided by its type, a tuple of
  arguments versus a str, never by the variable's name.
Rule commands are ninja text written by buildgen itself (they hold `$in`, `$out`, `$args`)
and are emitted verbatim.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from functools import lru_cache

from buildgen.errors import BuildgenError, Diagnostic

# A variable's value: a str is literal text, a tuple is a list of command arguments.
Value = str | tuple[str, ...]


def _check_text(text: str, what: str) -> None:
    if "\n" in text or "\r" in text:
        raise BuildgenError(
            Diagnostic(
                f"{what} {text!r} contains a line break, which a ninja file cannot hold",
                hint="rename the file or folder",
            )
        )


# Nearly every path holds none of these: such a path is written as it is, at once.
_PATH_SPECIAL = re.compile(r"[$ :|\n\r]")


def escape_path(path: str) -> str:
    """Escape a path for a build or default line; reject what ninja cannot represent."""
    if path and _PATH_SPECIAL.search(path) is None:
        return path
    _check_text(path, "path")
    if "|" in path:
        raise BuildgenError(
            Diagnostic(
                f"path {path!r} contains '|', which ninja cannot escape",
                hint="rename the file or folder",
            )
        )
    if not path:
        raise BuildgenError("empty path in the build graph")
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


# _PATH_SPECIAL without the space, for a line of paths joined by spaces (escape_paths).
_PATHS_SPECIAL = re.compile(r"[$:|\n\r]")


def escape_paths(paths: Sequence[str]) -> str:
    """escape_path of each of `paths`, joined by spaces: in one pass over the line when no
    path needs escaping (the spaces are then the joiner's), as nearly always."""
    text = " ".join(paths)
    if all(paths) and text.count(" ") == len(paths) - 1 and not _PATHS_SPECIAL.search(text):
        return text
    return " ".join(escape_path(p) for p in paths)


def escape_value(text: str) -> str:
    """Escape literal text used as a variable's value (spaces and ':' are fine there)."""
    _check_text(text, "value")
    escaped = text.replace("$", "$$")
    # ninja drops leading spaces of a value; `$ ` keeps one.
    return "$ " + escaped[1:] if escaped.startswith(" ") else escaped


# What shlex.quote leaves unquoted (its own test); the space is the joiner's, see below.
_SHELL_UNSAFE = re.compile(r"[^\w@%+=:,./ -]", re.ASCII)


def quote_args(args: Sequence[str]) -> str:
    """Shell-quote each argument once and escape the result for ninja."""
    text = " ".join(args)
    # Nearly every argument is a path or a flag that shlex.quote returns as it is: when
    # no argument is empty or holds a space (the spaces are the joiner's) or anything
    # quoting would touch, the joined text is the quoted one, checked in one pass.
    if all(args) and text.count(" ") == len(args) - 1 and not _SHELL_UNSAFE.search(text):
        return escape_value(text)
    return escape_value(" ".join(shlex.quote(a) for a in args))


# Flags and commands repeat across every model of a manifest: each tuple is formatted once.
_quote_args_once = lru_cache(maxsize=4096)(quote_args)


def format_value(value: Value) -> str:
    return _quote_args_once(value) if isinstance(value, tuple) else escape_value(value)


class NinjaWriter:
    """Accumulates lines; the caller decides order (emit.py sorts) and where to write."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"

    def newline(self) -> None:
        self._lines.append("")

    def comment(self, text: str) -> None:
        for line in text.splitlines():
            self._lines.append(f"# {line}".rstrip())

    def variable(self, key: str, value: Value, indent: int = 0) -> None:
        self._lines.append(f"{'  ' * indent}{key} = {format_value(value)}")

    def raw_variable(self, key: str, ninja_text: str, indent: int = 0) -> None:
        """A value that is already ninja text, such as a rule command using `$in`."""
        _check_text(ninja_text, "ninja text")
        self._lines.append(f"{'  ' * indent}{key} = {ninja_text}")

    def pool(self, name: str, depth: int) -> None:
        self._lines.append(f"pool {name}")
        self._lines.append(f"  depth = {depth}")

    def rule(self, name: str, bindings: Iterable[tuple[str, str]]) -> None:
        """`bindings` are (key, ninja text) pairs: command, description, depfile, ..."""
        self._lines.append(f"rule {name}")
        for key, ninja_text in bindings:
            self.raw_variable(key, ninja_text, indent=1)

    def build(
        self,
        outputs: Sequence[str],
        rule: str,
        inputs: Sequence[str] = (),
        implicit: Sequence[str] = (),
        order_only: Sequence[str] = (),
        implicit_outputs: Sequence[str] = (),
        variables: Iterable[tuple[str, Value]] = (),
    ) -> None:
        head = escape_paths(outputs)
        if implicit_outputs:
            head += " | " + escape_paths(implicit_outputs)
        parts = [f"build {head}: {rule}"]
        if inputs:
            parts.append(escape_paths(inputs))
        if implicit:
            parts += ["|", escape_paths(implicit)]
        if order_only:
            parts += ["||", escape_paths(order_only)]
        lines = self._lines
        lines.append(" ".join(parts))
        for key, value in variables:  # self.variable(key, value, indent=1), inlined: hot
            lines.append(f"  {key} = {format_value(value)}")

    def default(self, paths: Sequence[str]) -> None:
        self._lines.append("default " + escape_paths(paths))
