"""Shared types of the action cache: what an action produced.

The local store and the remote client (Bazel HTTP protocol) both speak these; an action
entry maps the action key to an ``ActionResult`` whose outputs name content-addressed blobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# The archive rule's name, and the suffix of the folder it writes in (buildgen/ninja/rules.py
# emits them; the wrapper stages an archive the same way, without importing the writer).
ARCHIVE_RULE = "ar"
ARCHIVE_STAGING = ".partial"


@dataclass(frozen=True)
class OutputFile:
    path: str  # relative to the build dir, '/'-separated
    digest: str  # sha256 hex of the bytes
    size: int
    executable: bool = False


@dataclass(frozen=True)
class ActionResult:
    outputs: tuple[OutputFile, ...]
    exit_code: int = 0


class RemoteStore(Protocol):
    """A remote cache as the wrapper uses it: the HTTP cache (buildgen.cache.remote) or the
    executor's action cache (buildgen.remote.action_cache). Every call is a miss or a
    skipped write when anything goes wrong; none raises."""

    @property
    def read_only(self) -> bool: ...

    def get_action(self, key: str) -> ActionResult | None: ...
    def put_action(self, key: str, result: ActionResult) -> None: ...
    def get_blob(self, digest: str, size: int) -> bytes | None: ...
    def put_blob(self, digest: str, data: bytes) -> None: ...
    def upload_action(self, key: str, result: ActionResult, root: Path, *,
                      force: bool = False) -> None: ...
