"""Write a cached action's outputs into the build dir.

All blobs are fetched before anything is written, so a blob that turns out missing
(evicted meanwhile, corrupt on the server) leaves the build dir untouched and the action
runs. Each output is written atomically. With restat an output whose bytes are already
there is left alone — the stage would not have rewritten it either, and ninja's restat then
stops the wave; without restat every output is rewritten, so its mtime is newer than its
inputs as ninja expects after running the command.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from buildgen.cache.model import ActionResult
from buildgen.fsutil import write_atomic


def restore(
    result: ActionResult, fetch: Callable[[str, int], bytes | None], restat: bool,
    before_writing: Callable[[], None] | None = None,
) -> bool:
    """Write `result`'s outputs (paths relative to the cwd, the build dir); False, with
    nothing written, when a blob cannot be had. `fetch(digest, size)` may refuse to read
    more than `size` bytes. `before_writing` runs once every blob is had (it stops the
    action's command, started before the lookup: buildgen/cache/exec.py)."""
    staged: list[tuple[str, bytes, bool]] = []
    for output in result.outputs:
        data = fetch(output.digest, output.size)
        if data is None or len(data) != output.size:
            return False
        staged.append((output.path, data, output.executable))
    if before_writing is not None:
        before_writing()
    for path, data, executable in staged:
        if restat and _same_bytes(path, data):
            continue
        write_atomic(path, data, executable=executable)
    return True


def _same_bytes(path: str, data: bytes) -> bool:
    try:
        if os.path.getsize(path) != len(data):
            return False
        with open(path, "rb") as f:
            return f.read() == data
    except OSError:
        return False
