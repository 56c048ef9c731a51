"""`python -m buildgen.worker.server FOLDER IDENTITY`: the warm worker (see __init__).

Started in the background by a client that found no worker. One per identity: the first
to lock `<identity>.lock` serves, later ones exit. It imports what actions use, checks that
it is the identity it was asked to be, and serves `<identity>.sock` until it has been idle
for BUILDGEN_WORKER_IDLE seconds, or until the Python distributions it imported change.
Its runners (runner.py) accept the connections; it keeps one of them on duty.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import os
import pkgutil
import selectors
import signal
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from buildgen.resources import site_folder_stamps
from buildgen.worker.client import socket_name, socket_path
from buildgen.worker.identity import worker_identity
from buildgen.worker.runner import DUTY, IDLE, STALE, TOOK, run_forever

ENV_IDLE = "BUILDGEN_WORKER_IDLE"
DEFAULT_IDLE_S = 300.0
STALE_S = 24 * 3600.0
# What Python stages import besides buildgen itself (they import it lazily: warm it here).
_LIBRARIES = ("numpy", "onnx", "onnx.numpy_helper", "onnx.reference", "yaml", "jsonschema")


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m buildgen.worker.server FOLDER IDENTITY", file=sys.stderr)
        return 2
    folder, identity = argv
    lock = os.open(os.path.join(folder, f"{identity}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another worker serves this identity
    with contextlib.suppress(OSError):
        os.ftruncate(2, 0)  # the log (stderr) is this worker's from here on
    _prune(folder)
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]  # `-m` put the folder it started in first: not a place to import from
    # Live in the worker folder, not in the build's that started it: a worker outlives
    # that build and must not keep its folder busy (an unmount) or alive (once deleted).
    # Each child enters its request's folder. From here the socket's name is short.
    folder = os.path.abspath(folder)
    sys.path[:] = [os.path.abspath(entry) for entry in sys.path if entry]
    os.chdir(folder)
    mine = _identity()
    if mine != identity:
        print(f"worker: asked to be {identity}, is {mine}: exiting", file=sys.stderr)
        return 1
    _warm()
    if _identity() != identity:  # a file changed while it was being imported
        print("worker: buildgen changed while starting: exiting", file=sys.stderr)
        return 1
    # The warm objects live as long as the worker: out of the collector's sight, a child's
    # collections do not touch (and so copy) the pages they sit on.
    gc.collect()
    gc.freeze()
    path = socket_path(folder, identity)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_name(identity))  # relative: see client.connect
    listener.listen(128)
    print(f"worker {os.getpid()}: serving {identity}", file=sys.stderr, flush=True)
    # `kill` (SIGTERM) stops it as cleanly as idleness; actions in flight run on.
    signal.signal(signal.SIGTERM, _stop)
    served = [0]  # actions handed to children, counted as they are
    try:
        why = _serve(listener, _idle_seconds(), served, lock)
    except _Stopped:
        why = "stopped (SIGTERM)"
    finally:
        listener.close()
        # What the clients made (the start stamp) goes with the worker; the lock last.
        for name in (path, f"{identity}.started", f"{identity}.lock"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, name))
    print(f"worker {os.getpid()}: served {served[0]} actions; exiting: {why}", file=sys.stderr)
    return 0


class _Stopped(Exception):
    pass


def _stop(_signum: int, _frame: object) -> None:
    raise _Stopped


def _prune(folder: str) -> None:
    """Forget the files of workers long gone (every edit of buildgen is a new identity):
    a day after their last change, those of an identity no socket serves."""
    cutoff = time.time() - STALE_S
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            identity, _, suffix = entry.name.partition(".")
            if suffix not in ("log", "lock", "started") or os.path.exists(
                    socket_path(folder, identity)):
                continue
            with contextlib.suppress(OSError):
                if entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)


def _identity() -> str:
    return worker_identity(sys.executable, os.environ.get("PYTHONPATH", ""))


def _idle_seconds() -> float:
    try:
        return max(0.1, float(os.environ.get(ENV_IDLE, DEFAULT_IDLE_S)))
    except ValueError:
        return DEFAULT_IDLE_S


def _warm() -> None:
    """Import the wrapper, every stage and what they use, so that a forked runner finds them
    loaded. A module that cannot load here (an optional library missing) is left for the
    action to report, exactly as without a worker."""
    import buildgen
    from buildgen.cache import command
    from buildgen.worker.stages import run_stage_in_fork

    command.stage_runner = run_stage_in_fork
    for name in _LIBRARIES:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    for module in pkgutil.walk_packages(buildgen.__path__, "buildgen."):
        if module.name.rpartition(".")[2] == "__main__":
            continue  # runs a command line when imported
        with contextlib.suppress(Exception):
            importlib.import_module(module.name)


def _serve(listener: socket.socket, idle: float, served: list[int], lock: int) -> str:
    """Serve until idle, counting actions in `served`; why it stopped. `lock` is the
    worker's own (its runners do not hold it)."""
    pool = _Runners(listener, lock, site_folder_stamps())
    try:
        pool.fork_on_duty()  # the first connection finds a runner waiting
        while True:
            events = pool.selector.select(timeout=idle)
            if not events:
                if not pool.busy:
                    return f"idle for {idle:g} s"
                continue
            for key, _mask in events:
                if key.fileobj is listener:
                    if pool.duty is None:  # a connection waits, and every runner is busy
                        pool.fork_on_duty()
                    continue
                why = pool.heard_from(key.data, served)
                if why:
                    return why
    finally:
        pool.close()


@dataclass
class _Runner:
    pid: int
    control: socket.socket  # the worker's end of the pair; the runner holds the other


class _Runners:
    """The worker's runners (runner.py). One is on duty: it accepts the next connection
    itself. When it takes one, an idle runner goes on duty; with none idle the worker
    watches the listener, and a connection that waits there gets a new fork. So parallel
    ninja jobs get parallel processes with no pool to size. At most MAX_IDLE wait between
    builds; the rest are let go."""

    MAX_IDLE = max(2, os.cpu_count() or 2)

    def __init__(self, listener: socket.socket, lock: int, sites: list[tuple[str, int | None]]):
        self.listener = listener
        self.lock = lock
        self.sites = sites
        self.selector = selectors.DefaultSelector()
        self.watching = False  # whether the listener is in the selector (no runner on duty)
        self.duty: _Runner | None = None
        self.idle: list[_Runner] = []
        self.busy: dict[int, _Runner] = {}
        # The kernel reaps runners as they exit (a runner sets it back for its own
        # children): the worker wants no statuses, and an end-of-file on a runner's socket
        # comes just before its exit, so a waitpid there would race it.
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)

    def fork_on_duty(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            ours.close()
            os.close(self.lock)
            for other in (*self.idle, *self.busy.values(), *filter(None, [self.duty])):
                other.control.close()  # so that each runner alone holds its own end
            run_forever(theirs, self.listener, self.sites)
        theirs.close()
        runner = _Runner(pid, ours)
        self.selector.register(ours, selectors.EVENT_READ, runner)
        self._on_duty(runner)

    def heard_from(self, runner: _Runner, served: list[int]) -> str | None:
        """A runner took a connection, is idle again, or has gone (its end closed); why
        the worker must stop, if it must."""
        try:
            message = runner.control.recv(1)
        except OSError:
            message = b""
        if message == TOOK:
            served[0] += 1
            self.busy[runner.pid] = runner
            if self.duty is runner:
                self._next_on_duty()
            return None
        if message == STALE:
            return "Python distributions changed"
        self.busy.pop(runner.pid, None)
        if message == IDLE and self.duty is None:
            if self._put_on_duty(runner):
                return None
        elif message == IDLE and len(self.idle) < self.MAX_IDLE:
            self.idle.append(runner)
            return None
        self._forget(runner)
        return None

    def _next_on_duty(self) -> None:
        """The runner on duty has gone or taken a connection: an idle one goes on duty,
        else the listener is watched for the next connection."""
        self.duty = None
        while self.idle:
            if self._put_on_duty(self.idle.pop()):
                return
        self._watch(True)

    def _put_on_duty(self, runner: _Runner) -> bool:
        try:
            runner.control.sendall(DUTY)
        except OSError:
            self._forget(runner)  # it died while idle
            return False
        self._on_duty(runner)
        return True

    def _on_duty(self, runner: _Runner) -> None:
        self.duty = runner
        self._watch(False)

    def _watch(self, listener: bool) -> None:
        if listener and not self.watching:
            self.selector.register(self.listener, selectors.EVENT_READ)
        elif not listener and self.watching:
            self.selector.unregister(self.listener)
        self.watching = listener

    def _forget(self, runner: _Runner) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(runner.control)
        runner.control.close()  # an idle runner sees the end and exits
        self.busy.pop(runner.pid, None)
        if runner in self.idle:
            self.idle.remove(runner)
        if self.duty is runner:
            self._next_on_duty()

    def close(self) -> None:
        for runner in (*self.idle, *self.busy.values(), *filter(None, [self.duty])):
            runner.control.close()
        self.selector.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
