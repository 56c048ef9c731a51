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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path

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
        try:
            document = json.loads(path.read_bytes())
            result = _decode(document)
        except (OSError, ValueError, KeyError, TypeError):
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

    def get_blob(self, digest: str) -> bytes | None:
        path = self._cas(digest)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if hashlib.sha256(data).hexdigest() != digest:
            # Damaged (a disk error, a hand edit): drop it so the next store replaces it.
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        _touch(path)
        return data

    def has_blob(self, digest: str) -> bool:
        return self._cas(digest).is_file()

    def put_blob(self, digest: str, data: bytes) -> int:
        """Store `data` under `digest` unless present; returns the bytes written."""
        path = self._cas(digest)
        if _touch(path):
            return 0
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


def _touch(path: Path) -> bool:
    """Mark `path` used now; False when it does not exist (evicted meanwhile)."""
    try:
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
