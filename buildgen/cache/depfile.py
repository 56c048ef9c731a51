"""Read and write Makefile-syntax depfiles the way ninja does (`deps = gcc`).

The cache learns an action's hidden inputs (headers, external-data files, a partition
step's module) from the depfile the tool wrote, and on a hit writes one back, because a
`deps = gcc` rule makes ninja read `$out.d` after the command even when no tool ran.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache


def parse_depfile(text: str) -> list[str]:
    """Every prerequisite named in `text` (all rules of the file), in order, without
    repeats. Handles `\\`-newline continuations, `\\ ` and `\\#` escapes and `$$`."""
    return list(_parsed(text))


# A runner (buildgen/worker/runner.py) reads the same depfile text again and again: a
# rebuilt source includes the headers it did before.
@lru_cache(maxsize=64)
def _parsed(text: str) -> tuple[str, ...]:
    words = _words(text.replace("\\\r\n", " ").replace("\\\n", " "))
    deps: list[str] = []
    seen: set[str] = set()
    in_targets = True
    for word, ends_target in words:
        if word == "\n":
            in_targets = True
            continue
        if in_targets:
            if ends_target:
                in_targets = False
            continue
        if word and word not in seen:
            seen.add(word)
            deps.append(word)
    return tuple(deps)


# One token per match (runs of plain characters whole, so a depfile of a few hundred
# headers takes a few dozen matches per line, not a Python step per character).
_TOKEN = re.compile(r"""
    (?P<escape>\\+)(?=[ #])(?P<escaped>[ #])?  # before ' ' or '#': see _words
  | (?P<backslashes>\\+)                     # elsewhere literal
  | (?P<dollar>\$\$)
  | (?P<colon>:)(?=[ \t\r\n]|$)             # ends the targets
  | (?P<space>[ \t\r]+)
  | (?P<newline>\n)
  | (?P<plain>[^\\$: \t\r\n]+|[$:])
""", re.VERBOSE)


def _words(text: str) -> list[tuple[str, bool]]:
    """Split into (word, is the last target before ':') pairs; a newline is its own word."""
    out: list[tuple[str, bool]] = []
    current: list[str] = []

    def flush(ends_target: bool = False) -> None:
        if current or ends_target:
            out.append(("".join(current), ends_target))
            current.clear()

    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind == "escaped" or kind == "escape":
            # Before a space or '#', 2N+1 backslashes are N backslashes and an escaped
            # character, 2N are N backslashes and a separator.
            run = len(match.group("escape"))
            current.append("\\" * (run // 2))
            if run % 2:
                current.append(match.group("escaped"))
            elif match.group("escaped") == "#":
                current.append("#")  # not escaped, but no separator either: a plain '#'
            else:
                flush()
        elif kind == "backslashes" or kind == "plain":
            current.append(match.group())
        elif kind == "dollar":
            current.append("$")
        elif kind == "colon":
            flush(ends_target=True)
        elif kind == "space":
            flush()
        else:  # newline
            flush()
            out.append(("\n", False))
    flush()
    return out


def depfile_text(target: str, dependencies: Sequence[str]) -> str:
    """`target: dep dep ...` with the escapes parse_depfile (and ninja) undo."""
    deps = " \\\n  ".join(_escape(d) for d in dependencies)
    return f"{_escape(target)}: {deps}\n"


def _escape(path: str) -> str:
    path = re.sub(r"(\\+)(?=[ #])", lambda m: m.group(1) * 2, path)
    return path.replace(" ", "\\ ").replace("#", "\\#").replace("$", "$$")
