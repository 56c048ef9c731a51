"""Shared types of the action cache: what an action produced.

The local store and the remote client (Bazel HTTP protocol) both speak these; an action
entry maps the action key to an ``ActionResult`` whose outputs name content-addressed blobs.
"""

from __future__ import annotations

from dataclasses import dataclass


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
