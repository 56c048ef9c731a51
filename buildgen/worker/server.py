"""`python -m buildgen.worker.server FOLDER IDENTITY`: the warm worker (see __init__).

Started in the background by a client that found no worker. One per identity: the first
to lock `<identity>.lock` serves, later ones exit. It imports what actions use, checks that
it is the identity it was asked to be, and serves `<identity>.sock` until it has been idle
for BUILDGEN_WORKER_IDLE seconds, or until the Python distributions it imported change.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import marshal
import os
import pkgutil
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence

from buildgen.resources import site_folder_stamps
from buildgen.worker.client import (
    DONE,
    HEADER_BYTES,
    STARTED,
    decode_number,
    encode_number,
    socket_name,
    socket_path,
)
from buildgen.worker.identity import worker_identity
from buildgen.worker.stages import run_main, run_stage

ENV_IDLE = "BUILDGEN_WORKER_IDLE"
DEFAULT_IDLE_S = 300.0
STALE_S = 24 * 3600.0
# What Python stages import besides buildgen itself (they import it lazily: warm it here).
_LIBRARIES = ("numpy", "onnx", "onnx.numpy_helper", "onnx.reference", "yaml", "jsonschema")
_MAX_REQUEST = 64 << 20  # an action's argv and environment: far less


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
        why = _serve(listener, _idle_seconds(), served)
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
    """Import the wrapper, every stage and what they use, so that a forked child finds them
    loaded. A module that cannot load here (an optional library missing) is left for the
    action to report, exactly as without a worker."""
    import buildgen
    from buildgen.cache import exec as cache_exec
    from buildgen.worker.stages import run_stage_in_fork

    cache_exec.stage_runner = run_stage_in_fork
    for name in _LIBRARIES:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    for module in pkgutil.walk_packages(buildgen.__path__, "buildgen."):
        if module.name.rpartition(".")[2] == "__main__":
            continue  # runs a command line when imported
        with contextlib.suppress(Exception):
            importlib.import_module(module.name)


def _serve(listener: socket.socket, idle: float, served: list[int]) -> str:
    """Serve until idle, counting actions in `served`; why it stopped."""
    sites = site_folder_stamps()
    children: set[int] = set()
    listener.settimeout(idle)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            _reap(children)
            if not children:
                return f"idle for {idle:g} s"
            continue
        _reap(children)
        if site_folder_stamps() != sites:
            conn.close()  # the client runs the action itself
            return "Python distributions changed"
        if not _same_user(conn):
            conn.close()
            continue
        conn.settimeout(None)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            listener.close()
            os._exit(_serve_one(conn))
        children.add(pid)
        served[0] += 1
        conn.close()


def _reap(children: set[int]) -> None:
    for pid in list(children):
        with contextlib.suppress(ChildProcessError):
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done == 0:
                continue
        children.discard(pid)


def _same_user(conn: socket.socket) -> bool:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def _serve_one(conn: socket.socket) -> int:
    """In the forked child: become the action's process, run the wrapper, report."""
    try:
        os.setpgid(0, 0)  # the client forwards ninja's interrupts to this group
        header, fds, _flags, _addr = socket.recv_fds(conn, HEADER_BYTES, 3)
        if len(header) != HEADER_BYTES or len(fds) != 3:
            return 1
        size = decode_number(header)
        if size > _MAX_REQUEST:
            return 1
        request = marshal.loads(_read_exactly(conn, size))
        env = request["env"]
        if env.get("PYTHONPATH", "") != os.environ.get("PYTHONPATH", ""):
            return 1  # it would import other code: the client runs it itself
        for number, fd in enumerate(fds):
            os.dup2(fd, number)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(env)
        os.umask(int(request["umask"]))
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        conn.sendall(STARTED + encode_number(os.getpid()))
    except (OSError, ValueError, EOFError, KeyError, TypeError):
        return 1
    done = _watch_client(conn)
    run = _run_wrapper if request.get("mode") == "exec" else run_stage
    code = run(list(request["argv"]))
    done.set()
    with contextlib.suppress(OSError):
        conn.sendall(DONE + encode_number(code))
    return code


def _watch_client(conn: socket.socket) -> threading.Event:
    """Kill the action's process group if its client dies before it ends: a build killed
    with SIGKILL (a CI timeout, `kill -9` of ninja's group) must not leave the action
    running and writing after a restarted build began, as it would not without a worker.
    Set the returned event once the action has ended."""
    ended = threading.Event()

    def watch() -> None:
        with contextlib.suppress(OSError):
            conn.recv(1)  # the client sends nothing more: this returns when it is gone
        if not ended.is_set():
            os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()
    return ended


def _run_wrapper(argv: list[str]) -> int:
    from buildgen.cache import exec as cache_exec

    return run_main(cache_exec.main, "python -m buildgen.cache exec", argv)


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise OSError("the client went away")
        data += chunk
    return bytes(data)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
