"""The libraries a link reads: `-l` names found the way the linker finds them.

A shared library built against oneDNN 3.2 is not the one built against 3.3 even when no
header changed (the library's symbol versions, its SONAME), so a link's key covers the
bytes of every library it names. Big libraries are hashed once per path + size + mtime
(memoized); a linker script (Debian's libm.so is one) counts with the files it names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from buildgen.cache.keys import file_digest
from buildgen.cache.tools import Memo

_SCRIPT_LIMIT = 16 << 10  # a linker script is a few lines; a real library is bigger
_SCRIPT_PATHS = re.compile(r"(/[^\s()]+)")


def linked_libraries(command: Sequence[str], default_dirs: Sequence[str]) -> list[str]:
    """Absolute paths of the libraries `command` (a compiler-driver link) names with
    `-l<name>` / `-l:<file>` (searched in its `-L` folders, then `default_dirs`) or as
    absolute `.so`/`.a` arguments. Names not found are left out: the link fails on them."""
    search: list[str] = []
    wanted: list[str] = []
    found: list[str] = []
    words = list(command)
    for i, word in enumerate(words):
        if word == "-L" and i + 1 < len(words):
            search.append(words[i + 1])
        elif word.startswith("-L") and len(word) > 2:
            search.append(word[2:])
        elif word == "-l" and i + 1 < len(words):
            wanted.append(words[i + 1])
        elif word.startswith("-l") and len(word) > 2:
            wanted.append(word[2:])
        elif os.path.isabs(word) and re.search(r"\.(so(\.\d+)*|a)$", word):
            found.append(word)
    # The driver searches LIBRARY_PATH after the -L folders, before its own.
    from_env = [d for d in os.environ.get("LIBRARY_PATH", "").split(os.pathsep) if d]
    folders = [*search, *from_env, *default_dirs]
    for name in wanted:
        candidates = [name[1:]] if name.startswith(":") else [f"lib{name}.so", f"lib{name}.a"]
        path = _first(folders, candidates)
        if path is not None:
            found.append(path)
    return found


def _first(folders: Sequence[str], names: Sequence[str]) -> str | None:
    for folder in folders:
        for name in names:
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                return path
    return None


def library_digests(paths: Sequence[str], memo: Memo) -> list[tuple[str, str]]:
    """(path, digest) of each library and of the files its linker script names."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    pending = list(paths)
    while pending:
        path = pending.pop(0)
        if path in seen:
            continue
        seen.add(path)
        out.append((path, stat_memo_digest(path, memo)))
        pending += _script_members(path)
    return out


def stat_memo_digest(path: str, memo: Memo) -> str:
    """file_digest of a file outside the build, memoized by its path, size and mtime."""
    real = os.path.realpath(path)
    try:
        stat = os.stat(real)
    except OSError:
        return file_digest(real)
    fingerprint = ["file", real, stat.st_size, stat.st_mtime_ns, stat.st_ino]
    return memo.get_or_compute(fingerprint, lambda: file_digest(real))


def _script_members(path: str) -> list[str]:
    try:
        if os.path.getsize(path) > _SCRIPT_LIMIT:
            return []
        with open(path, "rb") as f:
            head = f.read()
    except OSError:
        return []
    if head.startswith(b"\x7fELF") or head.startswith(b"!<arch>"):
        return []
    text = head.decode("utf-8", "replace")
    if "GROUP" not in text and "INPUT" not in text:
        return []
    return [p for p in _SCRIPT_PATHS.findall(text) if os.path.isfile(p)]
