"""`python -m buildgen.worker.server FOLDER IDENTITY`: the warm worker (see __init__).

Started in the background by a client that found no worker. One per identity: the first
to lock `<identity>.lock` serves, later ones exit. It imports what actions use, checks that
it is the identity it was asked to be, and serves `<identity>.sock` until it has been idle
for BUILDGEN_WORKER_IDLE seconds, or until the Python distributions it imported change.
It accepts each connection and hands it to one of its runners (runner.py).
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
import struct
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from buildgen.resources import site_folder_stamps
from buildgen.worker.client import socket_name, socket_path
from buildgen.worker.identity import worker_identity
from buildgen.worker.runner import HAND_OFF, IDLE, run_forever

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
    sites = site_folder_stamps()
    pool = _Runners(listener, lock)
    try:
        while True:
            events = pool.selector.select(timeout=idle)
            if not events:
                if not pool.busy:
                    return f"idle for {idle:g} s"
                continue
            for key, _mask in events:
                if key.fileobj is not listener:
                    pool.heard_from(key.data)
                    continue
                conn, _ = listener.accept()
                if site_folder_stamps() != sites:
                    conn.close()  # the client runs the action itself
                    return "Python distributions changed"
                if not _same_user(conn):
                    conn.close()
                    continue
                conn.setblocking(True)
                sys.stdout.flush()
                sys.stderr.flush()
                pool.hand(conn)
                served[0] += 1
    finally:
        pool.close()


@dataclass
class _Runner:
    pid: int
    control: socket.socket  # the worker's end of the pair; the runner holds the other


class _Runners:
    """The worker's runners (runner.py): idle ones get the next connection, and a new one
    is forked when all are busy, so parallel ninja jobs get parallel processes with no
    pool to size. At most MAX_IDLE wait between builds; the rest are let go."""

    MAX_IDLE = max(2, os.cpu_count() or 2)

    def __init__(self, listener: socket.socket, lock: int):
        self.listener = listener
        self.lock = lock
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ)
        self.idle: list[_Runner] = []
        self.busy: dict[int, _Runner] = {}
        # The kernel reaps runners as they exit (a runner sets it back for its own
        # children): the worker wants no statuses, and an end-of-file on a runner's socket
        # comes just before its exit, so a waitpid there would race it.
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)

    def hand(self, conn: socket.socket) -> None:
        """Give `conn` to a runner; the worker keeps no copy of it."""
        try:
            while self.idle:
                runner = self.idle.pop()
                try:
                    socket.send_fds(runner.control, [HAND_OFF], [conn.fileno()])
                except OSError:
                    self._forget(runner)  # it died while idle
                    continue
                self.busy[runner.pid] = runner
                return
            self._fork(conn)
        finally:
            conn.close()

    def _fork(self, conn: socket.socket) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            ours.close()
            self.listener.close()
            os.close(self.lock)
            for other in (*self.idle, *self.busy.values()):
                other.control.close()  # so that each runner alone holds its own end
            run_forever(theirs, conn)
        theirs.close()
        runner = _Runner(pid, ours)
        self.busy[pid] = runner
        self.selector.register(ours, selectors.EVENT_READ, runner)

    def heard_from(self, runner: _Runner) -> None:
        """A runner reports idle, or has gone (its end closed)."""
        try:
            message = runner.control.recv(1)
        except OSError:
            message = b""
        self.busy.pop(runner.pid, None)
        if message != IDLE or len(self.idle) >= self.MAX_IDLE:
            self._forget(runner)
            return
        self.idle.append(runner)

    def _forget(self, runner: _Runner) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(runner.control)
        runner.control.close()  # an idle runner sees the end and exits
        self.busy.pop(runner.pid, None)
        if runner in self.idle:
            self.idle.remove(runner)

    def close(self) -> None:
        for runner in (*self.idle, *self.busy.values()):
            runner.control.close()
        self.selector.close()


def _same_user(conn: socket.socket) -> bool:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
