"""Cache stores after the reply: a runner (buildgen/worker/runner.py) answers an action's
client once the outputs are read and hashed, and writes them into the store after.

Why: on this project's disks each file the store creates costs 0.2–0.4 ms, and a miss
writes four or five of them (the object's blob, the entry, the depfile set's blob and
entry, the statistics): ~3 ms on the critical path of every compile, where the bar for
the whole wrapper is 10% of a 50 ms compile (docs/build.md). Bazel's
`--remote_cache_async` takes its uploads off the critical path the same way.

What keeps it safe:
- what is stored is read before the reply (the outputs' bytes and digests, the hidden
  inputs' digests, the key): a later action rewriting an output cannot change it;
- a runner holds a shared lock on `<build>/.buildgen/stores.lock` from before its reply
  until its stores are written; `buildgen build` takes it exclusively once ninja returns
  (`wait_for_stores`), so its summary, the next `buildgen build` and `buildgen cache
  stats` see every store;
- a plain `ninja` does not wait: a build started within milliseconds of the previous one
  may not find an entry still being written, and runs that action. Never a wrong hit.
- A remote cache's upload reads the outputs from the build folder again: with a remote
  store the wrapper writes before its reply, as it does without workers.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

LOCK = ".buildgen/stores.lock"  # relative to the build dir


def hold(build_dir: Path) -> int | None:
    """A shared lock that `wait_for_stores` waits on, held until `finish` releases it;
    None when the lock cannot be had (then `finish` just runs the work)."""
    path = build_dir / LOCK
    try:
        fd = _open_lock(path)
    except FileNotFoundError:  # a build folder before its first action: rarely
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = _open_lock(path)
        except OSError:
            return None
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        os.close(fd)
        return None
    return fd


def _open_lock(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)


def finish(work: Sequence[Callable[[], None]], held: int | None) -> bool:
    """Run the work an action left, then release `held`; whether all of it ended cleanly
    (a store that fails says so itself, on the worker's log: the action is long done)."""
    clean = True
    try:
        for job in work:
            try:
                job()
            except Exception:  # noqa: BLE001 (a bug in a store must not end the runner)
                traceback.print_exc(file=sys.stderr)
                clean = False
    finally:
        if held is not None:
            os.close(held)  # closing the only descriptor releases the lock
    return clean


def wait_for_stores(build_dir: Path) -> None:
    """Return once no runner is still writing an action's stores for this build folder."""
    with contextlib.suppress(OSError):
        fd = os.open(build_dir / LOCK, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        finally:
            os.close(fd)
