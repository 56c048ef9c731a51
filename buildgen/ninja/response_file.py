"""Response files: the list of objects a link or `ar` reads as `@file`, one path a line.

Written by the link_kernels stage; read back by the action cache (an action's key and a
remote action's inputs hold the files listed) and by the build summary (the objects a
build may still run). One format in one place: a path a line, as written, with nothing
that would need quoting (the link and `ar` split a response file's lines on whitespace).
"""

from __future__ import annotations

from collections.abc import Iterable

from buildgen.errors import error


def response_file_text(paths: Iterable[str]) -> str:
    """The file listing `paths`; a path a response file cannot hold is an error."""
    for path in paths:
        if not path or any(c.isspace() or c in "\\'\"" for c in path):
            raise error(f"{path!r} cannot be written to a response file")
    return "".join(f"{path}\n" for path in paths)


def read_response_file(path: str) -> list[str] | None:
    """The paths a response file lists, or None when it does not exist (yet)."""
    try:
        with open(path, encoding="utf-8") as listing:
            return [line for line in listing.read().splitlines() if line]
    except FileNotFoundError:
        return None
