"""At most N actions of a build on this machine at once, while the executor runs the rest.

With an executor, `-j` counts actions under way on the workers, 64 or more; the actions that
stay here (the Python stages, links, a rule that does not run remotely) and those that fall
back here when the executor fails would otherwise run 64 at a time on a laptop's cores.
ninja's pools cannot say this: a pool's depth is written into build.ninja at gen, which
must not depend on the machine, and whether an action ends up here is decided only as it
runs. So each local run holds one of N slots: an exclusive `flock` on one of N files in
the build's remote state folder. The kernel releases a lock when its holder exits, however
it exits, so a killed action never keeps a slot.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

SLOTS_DIR = "local-slots"
POLL_MAX = 0.05  # s between looks at the slots, at most


@contextlib.contextmanager
def local_slot(state_dir: Path, slots: int) -> Iterator[None]:
    """Hold one of `slots` slots for the body; wait (polling) until one is free."""
    folder = state_dir / SLOTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    first = os.getpid() % slots  # processes start their search at different slots
    delay = 0.001
    while True:
        for i in range(slots):
            fd = _take(folder / str((first + i) % slots))
            if fd is not None:
                try:
                    yield
                finally:
                    os.close(fd)  # releases the lock
                return
        time.sleep(delay)
        delay = min(delay * 2, POLL_MAX)


def _take(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd
