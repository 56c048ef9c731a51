"""What the partition reads from rules files, reduced to a digest for its command line.

A change to a kind's pattern table or cost model must re-run the partitions of targets
using the kind, and nothing else; gen puts this digest on the partition command line.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from buildgen.targets import get_kind


def tables_digest(kinds: Sequence[str]) -> str:
    """sha256 (first 16 hex digits) of the pattern tables and cost models of `kinds`."""
    # The declarations are frozen dataclasses of strings, numbers and tuples: their repr
    # is stable across runs.
    text = repr([(k, get_kind(k).patterns, get_kind(k).cost) for k in kinds])
    return hashlib.sha256(text.encode()).hexdigest()[:16]
