"""File writes that a build system can trust: atomic, and untouched when unchanged."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import stat
from pathlib import Path


def read_file(path: str | os.PathLike[str]) -> tuple[bytes, os.stat_result]:
    """A file's bytes and its status, through one descriptor: what every action reads
    (its settings, its depfile, its outputs) costs a syscall or three, not the layers of
    Path.read_text or open()."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        chunks = []
        while chunk := os.read(fd, max(info.st_size, 1 << 16)):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks), info


def write_atomic(path: str | os.PathLike[str], data: bytes | str,
                 executable: bool = False) -> None:
    """Write via a temp file in the same folder and rename, so a crash never leaves a half file.

    The file gets the mode a plain open() would give it (0666, or 0777 when `executable`,
    less the umask), not mkstemp's private 0600: other users and tools of a shared CI
    workspace read build files, and a file restored from the cache must not differ."""
    path = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    fd, tmp = _create_temp(path, 0o777 if executable else 0o666)
    try:
        with open(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # a failed write (a full disk) names what it wrote
        raise


_TEMPS = itertools.count()


def _create_temp(path: Path, mode: int) -> tuple[int, str]:
    """A new file `.<name>.<pid>.<n>.tmp` beside `path` (its folders made when missing),
    created with `mode` less the umask, as open() would.

    Not tempfile.mkstemp: its random names cost ~0.1 ms a file and its 0600 an fchmod,
    and the cache writes three or four files per action (docs/build.md). A name of
    this process's id and a counter is unique among live processes; O_EXCL makes one
    left by a dead process with the same id a retry, never a shared file."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    for attempt in range(100):
        suffix = f"{os.getpid()}.{next(_TEMPS)}" if attempt < 50 else os.urandom(6).hex()
        tmp = os.path.join(path.parent, f".{path.name}.{suffix}.tmp")
        try:
            return os.open(tmp, flags, mode), tmp
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))


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


def private_folder(path: Path) -> Path | None:
    """`path`, created mode 0700 if missing, when it is this user's own and no one else may
    write in it (a folder whose files buildgen runs or trusts); else None."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    return path if owned_privately(path) else None


def owned_privately(path: Path) -> bool:
    """`path` exists, is no symlink, belongs to this user and only they may write it."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            and not stat.S_ISLNK(info.st_mode))
