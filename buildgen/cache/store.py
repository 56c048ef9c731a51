"""The local store: blobs by sha256, action entries by key, in one folder.

    <dir>/cas/ab/abcdef...   a blob: an output's bytes, named by their sha256
    <dir>/ac/ab/<key>        an action entry: JSON of an ActionResult (output paths -> blobs)
    <dir>/memo/              tool identities and digests of big system files (tools.py)
    <dir>/stats.json         hits, misses and the store's size (stats.py)

Every file is written atomically (a temp file in the same folder, then os.replace), so a
reader sees a whole file or none. Nothing is ever trusted: a blob is checked against its
name when read, and a missing or damaged file is a miss, never an error — another build
sharing the folder may evict anything at any time. A hit touches what it read (its mtime
is the least-recently-used clock eviction sorts by).

Nor is the folder's content trusted to be plain files: reads go through `read_regular`,
which opens without blocking and without following a symbolic link anywhere below the
store's root, and takes only a regular file. A FIFO (a read of it would wait for ever), a
device, a folder or a link planted where an entry or blob belongs is a miss, and the next
store of that name replaces it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from buildgen.cache.model import ActionResult, OutputFile
from buildgen.fsutil import write_atomic

STORE_FORMAT = 1
_HEX64 = re.compile(r"[0-9a-f]{64}")
_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file marks a cache directory (buildgen's action cache); see bford.info/cachedir\n"
)


class LocalStore:
    def __init__(self, root: Path):
        self.root = root

    # -- action entries --------------------------------------------------------------------

    def get_action(self, key: str) -> ActionResult | None:
        path = self._ac(key)
        data = read_regular(self.root, ("ac", key[:2], _checked(key)))
        if data is None:
            return None
        try:
            result = _decode(json.loads(data))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        _touch(path)
        return result

    def put_action(self, key: str, result: ActionResult) -> int:
        """Store the entry (its blobs first: see put_blob); returns the bytes written."""
        data = json.dumps(_encode(result), sort_keys=True).encode()
        self._ensure_tagged()
        write_atomic(self._ac(key), data)
        return len(data)

    # -- blobs -----------------------------------------------------------------------------

    def get_blob(self, digest: str, size: int | None = None) -> bytes | None:
        path = self._cas(digest)
        data = read_regular(self.root, ("cas", digest[:2], _checked(digest)))
        if data is None:
            return None
        if hashlib.sha256(data).hexdigest() != digest:
            # Damaged (a disk error, a hand edit): drop it so the next store replaces it.
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        if size is not None and len(data) != size:
            return None  # the blob is right, the entry naming it is not
        _touch(path)
        return data

    def has_blob(self, digest: str) -> bool:
        return _is_regular(self._cas(digest))

    def put_blob(self, digest: str, data: bytes) -> int:
        """Store `data` under `digest` unless present; returns the bytes written."""
        path = self._cas(digest)
        if _is_regular(path) and _touch(path):
            return 0  # anything else there (a FIFO, a link) is replaced
        self._ensure_tagged()
        write_atomic(path, data)
        return len(data)

    # -- layout ----------------------------------------------------------------------------

    def _ac(self, key: str) -> Path:
        return self.root / "ac" / key[:2] / _checked(key)

    def _cas(self, digest: str) -> Path:
        return self.root / "cas" / digest[:2] / _checked(digest)

    def _ensure_tagged(self) -> None:
        tag = self.root / "CACHEDIR.TAG"
        if not tag.exists():
            write_atomic(tag, _TAG)


def read_regular(root: Path, parts: Sequence[str], limit: int | None = None) -> bytes | None:
    """The bytes of the regular file `root`/`parts...`, or None: when it is missing or
    unreadable, not a regular file (a FIFO is opened without blocking, then refused), longer
    than `limit`, or reached through a symbolic link below `root` (`root` itself may be one)."""
    nofollow = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
    fds: list[int] = []
    try:
        fds.append(os.open(root, os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY))
        for name in parts[:-1]:
            fds.append(os.open(name, nofollow | os.O_DIRECTORY, dir_fd=fds[-1]))
        fds.append(os.open(parts[-1], nofollow | os.O_NONBLOCK, dir_fd=fds[-1]))
        info = os.fstat(fds[-1])
        if not stat.S_ISREG(info.st_mode) or (limit is not None and info.st_size > limit):
            return None
        chunks = []
        while chunk := os.read(fds[-1], 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)


def open_lock(path: Path) -> IO[str]:
    """Open (creating) a lock file of the store for appending, never blocking on a FIFO or
    following a link planted there: anything but a regular file raises OSError."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    fd = os.open(path, flags, 0o666)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "a")
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Held while the body runs, across processes: an `flock` on `path` (made, with its
    folder, when missing; opened as `open_lock` opens it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_lock(path) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _touch(path: Path) -> bool:
    """Mark `path` used now; False when it does not exist (evicted meanwhile)."""
    try:
        if os.utime in os.supports_follow_symlinks:
            os.utime(path, follow_symlinks=False)  # a link swapped in: its target is no entry
        else:
            os.utime(path)
    except FileNotFoundError:
        return False
    except OSError:
        return path.exists()  # a read-only shared cache: usable, just not re-stamped
    return True


def _checked(name: str) -> str:
    if not _HEX64.fullmatch(name):
        raise ValueError(f"not a sha256 hex digest: {name!r}")
    return name


def _encode(result: ActionResult) -> dict[str, object]:
    return {
        "format": STORE_FORMAT,
        "exit_code": result.exit_code,
        "outputs": [
            {"path": f.path, "digest": f.digest, "size": f.size, "executable": f.executable}
            for f in result.outputs
        ],
    }


def _decode(document: dict[str, object]) -> ActionResult:
    if document.get("format") != STORE_FORMAT:
        raise ValueError("another store format")
    outputs = []
    for item in document["outputs"]:  # type: ignore[attr-defined]
        output = OutputFile(
            str(item["path"]), str(item["digest"]), int(item["size"]), bool(item["executable"])
        )
        check_output_path(output.path)
        _checked(output.digest)
        outputs.append(output)
    return ActionResult(tuple(outputs), int(document["exit_code"]))  # type: ignore[call-overload]


def check_output_path(path: str) -> None:
    """An entry is not content-addressed: refuse a path that would leave the build dir."""
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or set(parts) & {"", ".", ".."}:
        raise ValueError(f"output path {path!r} is not a relative path inside the build")
