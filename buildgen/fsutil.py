"""File writes that a build system can trust: atomic, and untouched when unchanged."""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from pathlib import Path


@functools.cache
def umask() -> int:
    """The process's umask (reading it means setting it: done once)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike[str], data: bytes | str,
                 executable: bool = False) -> None:
    """Write via a temp file in the same folder and rename, so a crash never leaves a half file.

    The file gets the mode a plain open() would give it (0666, or 0777 when `executable`,
    less the umask), not mkstemp's private 0600: other users and tools of a shared CI
    workspace read build files, and a file restored from the cache must not differ."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            os.fchmod(f.fileno(), (0o777 if executable else 0o666) & ~umask())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # a failed write (a full disk) names what it wrote
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
