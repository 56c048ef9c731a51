"""os.environ as CPython keeps it: a dict of bytes, read without decoding each variable."""

from __future__ import annotations

import os


def environ_data() -> dict[bytes, bytes] | None:
    """os.environ's own mapping of bytes (CPython's `_data`: what putenv was given), or
    None in an interpreter that keeps none. Each read of os.environ's items decodes every
    variable, ~40 an action: a memo key (cache/settings.py), a spawned command's
    environment (cache/command.py) and a runner's check of its own (worker/runner.py)
    take this instead."""
    data = getattr(os.environ, "_data", None)
    return data if isinstance(data, dict) else None
