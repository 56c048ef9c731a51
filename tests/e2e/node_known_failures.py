"""Node tests expected to fail today, each with its reason and the error it must show.

A known failure still has to fail *the known way*: its first error line must contain
`expect`, so a test that starts failing for a new reason is reported, not hidden. An
entry that starts passing makes test_node_tests fail until it is removed from here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownFailure:
    reason: str
    expect: str  # a substring of the failure's first error line


# Empty: every qualifying node test builds and matches the reference and onnxruntime.
KNOWN_FAILURES: dict[str, KnownFailure] = {}
