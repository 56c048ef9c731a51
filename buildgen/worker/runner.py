"""Runners: forks of the warm worker that serve one action after another.

Why not a fresh fork per action, as the worker first did: on this project's 2-core VM a
child forked from the ~80 MB worker spent 7–10 ms in the cache wrapper's hit path before
doing anything useful — ~950 copy-on-write page faults as it touched the parent's objects
(getrusage in the child) — where a process that had run the same path before took 2.2 ms.
A runner pays that once.

Who accepts: one runner at a time is *on duty* and accepts the next connection itself on
the worker's listener (its fork inherited it); when it has one it says so, and the worker
puts an idle runner on duty, or, when none is idle and a connection waits, forks another.
The worker is not on an action's path: it used to accept each connection and pass it to a
runner over a socketpair (SCM_RIGHTS), two more processes to wake per action (~0.2 ms of a
31 ms compile's 3 ms wrapper cost, this 2-core VM).

What keeps actions apart in a process that outlives them:
- each action's working directory, environment, umask, argv, standard streams and signal
  dispositions are set for it and put back afterwards (`_Baseline`);
- the Python stages an action runs are still forked from the runner (stages.py), and a
  request in `stage` mode runs in a fork of its own, so a stage's module state never
  outlives it; the cache wrapper itself keeps no state between calls but memos of pure
  functions (names of paths, parsed depfiles, resolved settings) and of file digests,
  keyed by each file's size, times and inode (cache/keys.py, cache/tools.py);
- the cache's stores are written after the reply, with the action's streams already given
  back and its working directory and umask still set (cache/write_behind.py); the runner
  reports idle only when they are done;
- a runner retires after an action that did not end cleanly (an interrupt or a signal:
  status 128 and above, a thread left running, a gRPC channel opened for a remote cache:
  gRPC and fork do not mix), after MAX_ACTIONS, and when the worker goes away; the worker
  then forks a new one. A runner killed mid-action (the client died, the OOM killer) costs
  what a killed child did before: the client runs the action cold.
"""

from __future__ import annotations

import _thread
import contextlib
import functools
import marshal
import os
import select
import signal
import socket
import struct
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from buildgen.cache import exec as cache_exec
from buildgen.cache import write_behind
from buildgen.cache.environ import environ_data
from buildgen.resources import site_folder_stamps
from buildgen.worker.client import DONE, HEADER_BYTES, STARTED, decode_number, encode_number
from buildgen.worker.stages import run_in_fork, run_main

MAX_ACTIONS = 500  # then a fresh fork: whatever an action leaks stays bounded
_MAX_REQUEST = 64 << 20  # an action's argv and environment: far less
# Runner -> worker: took a connection off the listener / ready again / Python's
# distributions changed (the worker stops). Worker -> runner: accept the next connection.
TOOK, IDLE, STALE, DUTY = b"t", b"i", b"s", b"a"
_RESET_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGINT)


def run_forever(control: socket.socket, listener: socket.socket,
                sites: list[tuple[str, int | None]]) -> NoReturn:
    """In a freshly forked runner, born on duty: accept a connection on the worker's
    listener and serve it, then wait on `control` until the worker puts it on duty again;
    until told to stop or unfit to go on. `sites`: the Python distributions' stamps
    when the worker started serving."""
    code = 1
    try:
        for signum in _RESET_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        baseline = _Baseline.capture()
        for served in range(1, MAX_ACTIONS + 1):
            conn = _accept(control, listener)
            if conn is None:
                break
            control.sendall(TOOK)
            if site_folder_stamps() != sites:
                conn.close()  # the client runs the action itself
                control.sendall(STALE)
                break
            clean = True
            if _same_user(conn):
                clean = serve_one(conn, baseline)
                baseline.restore()
            else:
                conn.close()
            if not clean or served == MAX_ACTIONS:
                break
            control.sendall(IDLE)
            if _message(control) != DUTY:
                break  # the worker went away or wants fewer runners
        code = 0
    except BaseException:  # noqa: BLE001 (an interrupt between actions: just go)
        pass
    os._exit(code)


def _accept(control: socket.socket, listener: socket.socket) -> socket.socket | None:
    """The next connection, once one comes; None if the worker goes away first. Only the
    runner on duty waits on the listener, so no other wakes with it."""
    ready, _, _ = select.select([listener, control], [], [])
    if control in ready:
        return None  # no message comes to a runner on duty: the worker has gone
    conn, _address = listener.accept()
    conn.setblocking(True)
    return conn


def _message(control: socket.socket) -> bytes:
    try:
        return control.recv(1)
    except OSError:
        return b""


def _same_user(conn: socket.socket) -> bool:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


@dataclass(frozen=True)
class _Baseline:
    """What an action changes in the runner's process, as it was before the first one."""

    cwd: str
    environ: dict[str, str]
    argv: list[str]
    umask: int
    streams: tuple[int, int, int]  # duplicates of fds 0, 1, 2
    group: int  # the worker's process group, where an idle runner waits

    @classmethod
    def capture(cls) -> _Baseline:
        mask = os.umask(0o022)  # reading the umask means setting it
        os.umask(mask)
        streams = tuple(os.dup(fd) for fd in (0, 1, 2))
        return cls(os.getcwd(), dict(os.environ), list(sys.argv), mask,
                   (streams[0], streams[1], streams[2]), os.getpgrp())

    def restore_streams(self) -> None:
        """Give the action's standard streams back: ninja reads its output until the last
        descriptor of the pipe closes, and this process may go on after the reply."""
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        for number, fd in enumerate(self.streams):
            os.dup2(fd, number)

    def restore(self) -> None:
        self.restore_streams()
        os.chdir(self.cwd)
        _ENVIRONMENT.become(self.environ)
        sys.argv[:] = self.argv
        os.umask(self.umask)
        for signum in _RESET_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        os.setpgid(0, self.group)  # an interrupt sent to the action's group misses it now


def serve_one(conn: socket.socket, baseline: _Baseline) -> bool:
    """Become the action's process, run it, report its status, then write what the cache
    wrapper left for after the reply (buildgen/cache/write_behind.py); whether this
    process is fit to serve another."""
    try:
        request = _receive(conn)
    except (OSError, ValueError, EOFError, KeyError, TypeError):
        request = None
    if request is None:
        conn.close()
        return True  # nothing ran: the client runs it itself
    threads = threading.active_count()
    had_grpc = "grpc" in sys.modules
    watch = _watch_client(conn)
    argv = [str(word) for word in request["argv"]]
    later: list[Callable[[], None]] = []
    if request.get("mode") == "exec":
        # In a group of its own (_receive): a command started early can be stopped.
        code = run_main(functools.partial(cache_exec.main, later=later.append, own_group=True),
                        "python -m buildgen.cache exec", argv)
    else:  # a stage without the cache: in a child of its own, so its state dies with it
        try:
            code = run_in_fork(argv) & 0xFF
        except KeyboardInterrupt:
            code = 130
    watch.ended = True
    held = write_behind.hold(Path.cwd()) if later else None  # before the reply
    baseline.restore_streams()
    with contextlib.suppress(OSError):
        conn.sendall(DONE + encode_number(code))
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)  # wakes the watcher: it sees the action ended
    conn.close()
    joined = watch.gone.acquire(timeout=1.0)
    try:
        stored = write_behind.finish(later, held)
    except BaseException:  # noqa: BLE001 (an interrupt: this runner retires)
        stored = False
    # 128 and above: an interrupt or a signal ended it, maybe halfway through our own code.
    return (stored and joined and code < 128 and threading.active_count() <= threads
            and ("grpc" in sys.modules) == had_grpc)


def _receive(conn: socket.socket) -> dict[str, Any] | None:
    """Read the request and take on its process state: None when it is not one to run."""
    header, fds, _flags, _addr = socket.recv_fds(conn, HEADER_BYTES, 3)
    if len(header) != HEADER_BYTES or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    size = decode_number(header)
    if size > _MAX_REQUEST:
        return None
    request = marshal.loads(_read_exactly(conn, size))
    env = request["env"]
    if env.get("PYTHONPATH", "") != os.environ.get("PYTHONPATH", ""):
        for fd in fds:
            os.close(fd)
        return None  # it would import other code: the client runs it itself
    for number, fd in enumerate(fds):
        os.dup2(fd, number)
        os.close(fd)
    os.chdir(request["cwd"])
    _ENVIRONMENT.become(env)
    os.umask(int(request["umask"]))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # A group of its own while the action runs: the client forwards ninja's interrupts to
    # it, and an idle runner, back in the worker's group, is no action to anyone looking.
    os.setpgid(0, 0)
    conn.sendall(STARTED + encode_number(os.getpid()))
    return dict(request)


class _Watch:
    """The watcher of one action's client: `ended` is set once the action is over, `gone`
    is released when the watcher has returned."""

    def __init__(self) -> None:
        self.ended = False
        self.gone = _thread.allocate_lock()
        self.gone.acquire()


def _watch_client(conn: socket.socket) -> _Watch:
    """Kill the action's process group if its client dies before it ends: a build killed
    with SIGKILL (a CI timeout, `kill -9` of ninja's group) must not leave the action
    running and writing after a restarted build began, as it would not without a worker.

    A bare `_thread`, not a threading.Thread: Thread.start waits until the new thread
    runs, two context switches (0.1 ms) in front of every action; this returns at once,
    and serve_one waits on `gone` after the reply instead of join()."""
    watch = _Watch()

    def run() -> None:
        try:
            with contextlib.suppress(OSError):
                conn.recv(1)  # the client sends nothing more: this returns when it is gone
            if not watch.ended:
                # The action's group by its id (this runner's pid), never "our group": were
                # the action to end just now, the runner would be back in the worker's.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(os.getpid(), signal.SIGKILL)
        finally:
            watch.gone.release()

    _thread.start_new_thread(run, ())
    return watch


class _Environment:
    """os.environ made equal to what an action wants, and back to the runner's own after
    it, changing only the variables that differ (a clear() and a refill cost a putenv per
    variable). What it holds is known without reading it (each read decodes a variable:
    17 us a check of 42, each way) when its bytes are as this left them."""

    def __init__(self) -> None:
        # What os.environ was last made equal to, and its bytes just after.
        self._last: tuple[dict[str, str], dict[bytes, bytes]] | None = None

    def become(self, wanted: dict[str, str]) -> None:
        data = environ_data()
        if self._last is not None and data is not None and data == self._last[1]:
            current = self._last[0]
        else:  # the first time, or someone else changed it since
            current = dict(os.environ)
        for name in [name for name in current if name not in wanted]:
            del os.environ[name]
        for name, value in wanted.items():
            if current.get(name) != value:
                os.environ[name] = value
        data = environ_data()
        self._last = (dict(wanted), dict(data)) if data is not None else None


_ENVIRONMENT = _Environment()


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise OSError("the client went away")
        data += chunk
    return bytes(data)
