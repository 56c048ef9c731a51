"""Read and write Makefile-syntax depfiles the way ninja does (`deps = gcc`).

The cache learns an action's hidden inputs (headers, external-data files, a partition
step's module) from the depfile the tool wrote, and on a hit writes one back, because a
`deps = gcc` rule makes ninja read `$out.d` after the command even when no tool ran.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def parse_depfile(text: str) -> list[str]:
    """Every prerequisite named in `text` (all rules of the file), in order, without
    repeats. Handles `\\`-newline continuations, `\\ ` and `\\#` escapes and `$$`."""
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
    return deps


def _words(text: str) -> list[tuple[str, bool]]:
    """Split into (word, is the last target before ':') pairs; a newline is its own word."""
    out: list[tuple[str, bool]] = []
    current: list[str] = []
    i = 0

    def flush(ends_target: bool = False) -> None:
        if current or ends_target:
            out.append(("".join(current), ends_target))
            current.clear()

    while i < len(text):
        ch = text[i]
        if ch == "\\":
            # Before a space or '#', 2N+1 backslashes are N backslashes and an escaped
            # character, 2N are N backslashes and a separator; elsewhere they are literal.
            rest = text[i:]
            run = len(rest) - len(rest.lstrip("\\"))
            following = text[i + run : i + run + 1]
            if following and following in " #":
                current.append("\\" * (run // 2))
                i += run
                if run % 2:
                    current.append(following)
                    i += 1
                continue
            current.append("\\" * run)
            i += run
            continue
        if ch == "$" and text.startswith("$$", i):
            current.append("$")
            i += 2
            continue
        if ch == ":" and (i + 1 == len(text) or text[i + 1] in " \t\r\n"):
            flush(ends_target=True)
        elif ch in " \t\r":
            flush()
        elif ch == "\n":
            flush()
            out.append(("\n", False))
        else:
            current.append(ch)
        i += 1
    flush()
    return out


def depfile_text(target: str, dependencies: Sequence[str]) -> str:
    """`target: dep dep ...` with the escapes parse_depfile (and ninja) undo."""
    deps = " \\\n  ".join(_escape(d) for d in dependencies)
    return f"{_escape(target)}: {deps}\n"


def _escape(path: str) -> str:
    path = re.sub(r"(\\+)(?=[ #])", lambda m: m.group(1) * 2, path)
    return path.replace(" ", "\\ ").replace("#", "\\#").replace("$", "$$")
