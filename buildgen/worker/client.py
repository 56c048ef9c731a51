"""The action wrapper's front door: hand the action to a warm worker, or run it cold.

build.ninja starts every cached action as

    $python -S .../buildgen/worker/client.py --worker <identity> exec <exec arguments>

(and, in a build without the cache, every Python stage as `... <identity> stage <args>`).

This file runs as a script under `-S` (no site, nothing of buildgen imported) and imports
only C modules (_socket, _signal, marshal; socket.py and signal.py would pull in enum and
re): starting it costs a bare interpreter, not the ~0.2 s of imports the wrapper and a
stage pay. It connects to the worker serving <identity> (a digest of this interpreter and
buildgen's files, computed by gen: buildgen/worker/identity.py), passes it the action's
argv, environment, working directory, umask and its own stdin/stdout/stderr (SCM_RIGHTS),
forwards interrupts, and exits with the action's status. Where there is no worker it starts
one in the background and runs this action the usual way (`python -m buildgen.cache exec`
or `python -m buildgen.stages`),
so a cold or broken worker only ever costs the old price. BUILDGEN_WORKERS=off never
touches a worker.
"""

from __future__ import annotations

import _signal
import _socket
import marshal
import os
import sys
import time

ENV_WORKERS = "BUILDGEN_WORKERS"  # off: run every action in its own interpreter
ENV_DIR = "BUILDGEN_WORKER_DIR"  # where sockets live (default: a private folder in /tmp)
SPAWN_BACKOFF_S = 30.0  # a worker that did not come up is not started again for this long
HEADER_BYTES = 4  # big-endian unsigned lengths and numbers
# Replies: STARTED + the action's process group, then DONE + its exit status.
STARTED, DONE = b"P", b"X"
REPLY_BYTES = 1 + HEADER_BYTES
# What the worker runs, and the module a cold start runs instead.
MODES = {"exec": ("buildgen.cache", "exec"), "stage": ("buildgen.stages",)}


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] != "--worker" or argv[2] not in MODES:
        print("buildgen worker client: expected --worker <identity> exec|stage <arguments>",
              file=sys.stderr)
        return 2
    identity, mode, args = argv[1], argv[2], argv[3:]
    # The identity names files: only what gen writes (hex digits) is taken.
    valid = 0 < len(identity) <= 64 and all(c in "0123456789abcdef" for c in identity)
    if valid and os.environ.get(ENV_WORKERS, "on").lower() not in ("off", "0", "no", "false"):
        folder = worker_dir()
        if folder is not None:
            code = _through_worker(folder, identity, mode, args)
            if code is not None:
                return code
    return _run_cold(mode, args)


def worker_dir() -> str | None:
    """A folder only this user can enter, or None (no workers) when that cannot be had."""
    folder = os.environ.get(ENV_DIR) or os.path.join(
        os.environ.get("TMPDIR") or "/tmp", f"buildgen-workers-{os.getuid()}"
    )
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return None
    # Anyone else's folder, or one others may write into, could hold their socket.
    if info.st_uid != os.getuid() or info.st_mode & 0o077 or not os.path.isdir(folder):
        return None
    return folder


def socket_name(identity: str) -> str:
    return f"{identity}.sock"


def socket_path(folder: str, identity: str) -> str:
    return os.path.join(folder, socket_name(identity))


# A socket's address holds at most 107 bytes, and a worker folder under a deep TMPDIR (or a
# test's tmp_path) passes that; the server binds its name from inside the folder.
_MAX_ADDRESS = 107


def connect(conn: _socket.socket, folder: str, identity: str) -> None:
    """Connect `conn` to the worker of `identity`, however long the folder's path."""
    path = socket_path(folder, identity)
    if len(os.fsencode(path)) <= _MAX_ADDRESS:
        conn.connect(path)
        return
    handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:  # the folder through its descriptor: a short path to the same socket
        conn.connect(f"/proc/self/fd/{handle}/{socket_name(identity)}")
    finally:
        os.close(handle)


def _through_worker(folder: str, identity: str, mode: str, args: list[str]) -> int | None:
    """The action's exit status, or None when no worker took it (nothing ran)."""
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        connect(conn, folder, identity)
    except OSError:
        conn.close()
        _start_worker(folder, identity)
        return None
    try:
        return _converse(conn, mode, args)
    finally:
        conn.close()


def encode_number(value: int) -> bytes:
    return value.to_bytes(HEADER_BYTES, "big")


def decode_number(data: bytes) -> int:
    return int.from_bytes(data, "big")


def _converse(conn: _socket.socket, mode: str, args: list[str]) -> int | None:
    mask = os.umask(0o022)
    os.umask(mask)
    # marshal: built in, and the worker is this very interpreter (its identity says so).
    request = marshal.dumps({
        "mode": mode, "argv": args, "cwd": os.getcwd(), "env": dict(os.environ), "umask": mask,
    })
    fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))
    try:
        conn.sendmsg([encode_number(len(request))],
                     [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        conn.sendall(request)
        started = _read(conn, REPLY_BYTES)
    except OSError:
        return None
    if len(started) < REPLY_BYTES or started[:1] != STARTED:
        return None  # the worker went away before starting it: run it here
    interrupted = _forward_interrupts(decode_number(started[1:]))
    try:
        done = _read(conn, REPLY_BYTES)
    except OSError:
        done = b""
    if len(done) == REPLY_BYTES and done[:1] == DONE:
        return decode_number(done[1:])
    if interrupted:
        return 128 + interrupted[-1]
    # The worker's process died mid-action (killed, out of memory). Actions write their
    # outputs atomically and are pure functions of their inputs: running it again is safe.
    return None


def _forward_interrupts(group: int) -> list[int]:
    """ninja interrupts its own process group; the action runs in the worker's: pass the
    signal on to the action's whole group."""
    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        try:  # noqa: SIM105 (contextlib is one more import on every action)
            os.killpg(group, signum)
        except OSError:
            pass

    for signum in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP):
        _signal.signal(signum, forward)
    return received


def _read(conn: _socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _start_worker(folder: str, identity: str) -> None:
    """Start a worker in the background, at most once per SPAWN_BACKOFF_S: while it warms up
    (or if it cannot start) actions run cold instead of each starting another."""
    stamp = os.path.join(folder, f"{identity}.started")
    try:
        if time.time() - os.stat(stamp).st_mtime < SPAWN_BACKOFF_S:
            return
    except OSError:
        pass
    try:
        with open(stamp, "w"):
            pass
        log = os.open(os.path.join(folder, f"{identity}.log"),
                      os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        null = os.open(os.devnull, os.O_RDWR)
        argv = [sys.executable, "-m", "buildgen.worker.server", folder, identity]
        actions = [
            (os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, null, 1),
            (os.POSIX_SPAWN_DUP2, log, 2),
        ]
        # A session of its own: ninja's Ctrl-C and the end of this build leave it alone.
        os.posix_spawn(sys.executable, argv, os.environ, file_actions=actions, setsid=True)
        os.close(log)
        os.close(null)
    except OSError:
        pass


def _run_cold(mode: str, args: list[str]) -> int:
    module, *sub = MODES[mode]
    argv = [sys.executable, "-m", module, *sub, *args]
    try:
        os.execv(sys.executable, argv)
    except OSError as exc:
        print(f"error: {sys.executable}: {exc.strerror or exc}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
