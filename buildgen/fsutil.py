"""File writes that a build system can trust: atomic, and untouched when unchanged."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write via a temp file in the same folder and rename, so a crash never leaves a half file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_if_changed(path: str | os.PathLike[str], data: bytes | str) -> bool:
    """Write only when the bytes differ, keeping the mtime so ninja's restat stops the wave.

    Returns True when the file was (re)written.
    """
    path = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    try:
        if path.read_bytes() == payload:
            return False
    except FileNotFoundError:
        pass
    write_atomic(path, payload)
    return True
