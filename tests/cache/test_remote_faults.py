"""A zoo of bad remote-cache servers: every build still finishes, soon, with the right bytes.

Each server is a few lines of Python sockets on loopback (threads), so the faults are exact:
an HTTP 500 with escape sequences in its reason, a reset connection, a cut-off body, a body
that fails verification, a server that accepts and never answers, one that drips a byte a
second, one that never accepts, one that announces a terabyte, a garbage status line. The
build is the small project of tests/ninja; requests get a 2 s deadline
($BUILDGEN_REMOTE_CACHE_TIMEOUT), so the whole module takes well under two minutes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from buildgen.cache.protocol import decode_action_result
from buildgen.cache.remote import RemoteCache, printable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "ninja"))
from small_project import write_project  # noqa: E402

TIMEOUT = 2.0  # s: the requests' deadline in these builds
# Actions at once: each may have a request in flight before the first failure marks the
# remote down, so the bounds on requests below are in these (ninja's default is cores + 1).
JOBS = 2
BUILD_BOUND = 60.0  # s: a build against any server of the zoo finishes within this
LIBRARIES = ("tiny/cpu/libtiny.so", "tiny/cpu/libtiny.a")
NASTY = b"\x1b[31m\x1b]0;pwned\x07\x00\xff\xfe"  # ANSI colour, a title change, NUL, not UTF-8
_RAW = re.compile(rb"[^\x20-\x7e\n\r\t]")


class Zoo:
    """A Bazel-HTTP-cache server on loopback whose answers follow ``fault``.

    ``fault`` applies to every request, or with ``cas_only`` to GET /cas/ only (the AC
    entries are then served right, so the client gets as far as the blobs). "ok" is a
    working server: GET, HEAD and PUT against ``store`` (path -> bytes).
    """

    def __init__(self, fault: str, store: dict[str, bytes] | None = None, cas_only: bool = False):
        self.fault = fault
        self.cas_only = cas_only
        self.store = dict(store or {})
        self.requests: list[tuple[str, str]] = []
        self.stopping = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._thread.join(5)
        self.sock.close()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:  # the 0.1 s poll, or closed
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            conn.settimeout(10)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            head, _, body = head.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
            length = int(headers.get("content-length", "0"))
            while len(body) < length:
                body += conn.recv(65536)
            with self._lock:
                self.requests.append((method, path))
            faulty = not self.cas_only or (method == "GET" and path.startswith("/cas/"))
            self._answer(conn, method, path, body, self.fault if faulty else "ok")

    def _answer(self, conn: socket.socket, method: str, path: str, body: bytes, fault: str) -> None:
        stored = self.store.get(path)
        if fault == "ok":
            if method == "PUT":
                self.store[path] = body
                conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
            elif stored is None:
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            else:
                head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(stored)}\r\n\r\n".encode()
                conn.sendall(head + (stored if method == "GET" else b""))
        elif fault == "http500":
            conn.sendall(b"HTTP/1.1 500 " + NASTY + b"\r\nContent-Length: 9\r\n\r\n" + NASTY)
        elif fault == "bad-status":
            conn.sendall(NASTY + b" garbage\r\n\r\n")
        elif fault == "reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif fault == "truncated":
            data = stored or b"x" * 100
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(data)}\r\n\r\n".encode())
            conn.sendall(data[: len(data) // 2])
        elif fault == "garbage":  # as long as the real blob, other bytes: fails the sha256
            data = stored or b""
            garbage = (NASTY * (len(data) // len(NASTY) + 1))[: len(data)]
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(data)}\r\n\r\n".encode())
            conn.sendall(garbage)
        elif fault == "huge":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1099511627776\r\n\r\n" + NASTY)
            self.stopping.wait(30)  # a client that reads on waits for ever
        elif fault == "stall":
            self.stopping.wait(30)
        elif fault == "drip":
            answer = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + NASTY * 1000
            for byte in answer:
                if self.stopping.wait(1.0):
                    return
                conn.sendall(bytes([byte]))
        else:
            raise AssertionError(fault)


@contextlib.contextmanager
def never_accepting() -> Iterator[str]:
    """A listening socket whose backlog is full and which never accepts: connects time out."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        address = server.getsockname()
        fillers = []
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(OSError):
                filler.connect(address)
            fillers.append(filler)
        time.sleep(0.2)
        try:
            yield f"http://127.0.0.1:{address[1]}"
        finally:
            for filler in fillers:
                filler.close()


def refused_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again: nobody listens


@dataclass(frozen=True)
class Built:
    dir: Path
    output: bytes  # stdout + stderr, as bytes
    outcomes: dict[str, str]  # action output -> ran/local/remote
    seconds: float


def build(project: Path, cache: Path, remote: str | None) -> Built:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("BUILDGEN_") and k not in ("CPATH", "C_INCLUDE_PATH")
    }
    env.update(PYTHONPATH=str(REPO), BUILDGEN_CACHE_DIR=str(cache), NETRC=str(cache / "no"),
               BUILDGEN_REMOTE_CACHE_TIMEOUT=str(TIMEOUT))  # fmt: skip
    if remote:
        env["BUILDGEN_REMOTE_CACHE"] = remote
    build_dir = project / f"build-{len(list(project.glob('build-*')))}"
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "buildgen", "build", "--build-dir", str(build_dir), "-j", str(JOBS)],
        cwd=project, env=env, capture_output=True, timeout=BUILD_BOUND * 2, check=False,
    )  # fmt: skip
    seconds = time.monotonic() - start
    output = done.stdout + done.stderr
    assert done.returncode == 0, output.decode(errors="replace")
    journal = (build_dir / ".buildgen" / "actions.jsonl").read_text().splitlines()
    outcomes = {str(e["out"]): str(e["outcome"]) for e in map(json.loads, journal)}
    return Built(build_dir, output, outcomes, seconds)


@dataclass(frozen=True)
class Reference:
    project: Path
    libraries: dict[str, bytes]
    store: dict[str, bytes]  # a working server's store after one build


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """The libraries built without a remote, and a server store filled by a build."""
    root = tmp_path_factory.mktemp("faults")
    project = root / "p"
    write_project(project)
    plain = build(project, root / "cache-plain", None)
    libraries = {name: (plain.dir / name).read_bytes() for name in LIBRARIES}
    server = Zoo("ok")
    try:
        filled = build(project, root / "cache-fill", server.url)
    finally:
        server.stop()
    assert set(filled.outcomes.values()) == {"ran"}
    assert {name: (filled.dir / name).read_bytes() for name in LIBRARIES} == libraries
    assert any(p.startswith("/ac/") for p in server.store)
    return Reference(project, libraries, server.store)


def check(built: Built, reference: Reference) -> None:
    assert built.seconds < BUILD_BOUND, built.seconds
    for name, data in reference.libraries.items():
        assert (built.dir / name).read_bytes() == data, name
    raw = _RAW.search(built.output)
    assert raw is None, built.output[max(raw.start() - 80, 0) : raw.end() + 20]


# (fault, applies to GET /cas/ only, the most requests it may see)
ZOO = [
    ("http500", False, JOBS),
    ("bad-status", False, JOBS),
    ("reset", False, JOBS),
    ("stall", False, 2 * JOBS),
    ("drip", False, 2 * JOBS),
    ("truncated", True, None),
    ("garbage", True, None),
    ("huge", True, None),
    ("huge", False, None),
]


@pytest.mark.parametrize(("fault", "cas_only", "most"), ZOO, ids=lambda v: str(v))
def test_a_bad_server_costs_a_build_little(
    reference: Reference, tmp_path: Path, fault: str, cas_only: bool, most: int | None
) -> None:
    server = Zoo(fault, reference.store, cas_only=cas_only)
    try:
        built = build(reference.project, tmp_path / "cache", server.url)
    finally:
        server.stop()
    print(f"{fault} (cas only: {cas_only}): {built.seconds:.1f} s, {len(server.requests)} requests")
    check(built, reference)
    assert "remote" not in built.outcomes.values()
    if most is not None:  # the first failure marks the remote down for the whole build
        assert 1 <= len(server.requests) <= most, server.requests
        assert b"unreachable" in built.output
    if fault == "garbage":
        # Every blob failed verification, every action ran and uploaded its outputs again.
        assert server.store == reference.store
        assert b"failed verification" in built.output
    if fault == "huge":
        assert b"more than the" in built.output  # cut off at the header, reported
        assert b"unreachable" not in built.output


@pytest.mark.parametrize("kind", ["never-accepts", "refused"])
def test_a_server_that_never_accepts(reference: Reference, tmp_path: Path, kind: str) -> None:
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(never_accepting()) if kind == "never-accepts" else refused_url()
        built = build(reference.project, tmp_path / "cache", url)
    print(f"{kind}: {built.seconds:.1f} s")
    check(built, reference)
    assert set(built.outcomes.values()) == {"ran"}
    assert b"unreachable" in built.output


def test_a_damaged_blob_is_uploaded_again(reference: Reference, tmp_path: Path) -> None:
    store = dict(reference.store)
    library = reference.libraries["tiny/cpu/libtiny.so"]
    path = f"/cas/{hashlib.sha256(library).hexdigest()}"
    assert store[path] == library
    store[path] = bytes([library[0] ^ 1]) + library[1:]  # one bit flipped: HEAD cannot tell
    server = Zoo("ok", store)
    try:
        first = build(reference.project, tmp_path / "cache-1", server.url)
        assert first.outcomes["tiny/cpu/libtiny.so"] == "ran"
        assert b"failed verification" in first.output
        assert server.store[path] == library  # healed: the fresh output overwrote it
        assert ("PUT", path) in server.requests
        second = build(reference.project, tmp_path / "cache-2", server.url)
    finally:
        server.stop()
    check(first, reference)
    check(second, reference)
    assert set(second.outcomes.values()) == {"remote"}
    assert b"warning" not in second.output


def test_a_damaged_blob_whose_entry_is_gone_is_uploaded_again(
    reference: Reference, tmp_path: Path
) -> None:
    """No entry names the blob any more, so nothing fetches it: the upload after the action
    ran must still replace it (HEAD finds one, of the wrong size)."""
    store = dict(reference.store)
    library = reference.libraries["tiny/cpu/libtiny.so"]
    digest = hashlib.sha256(library).hexdigest()
    store[f"/cas/{digest}"] = library[:-100]  # cut short, as by a full disk
    naming = [
        path for path, data in store.items()
        if path.startswith("/ac/") and any(
            f.digest == digest for f in decode_action_result(data).outputs
        )
    ]  # fmt: skip
    assert naming
    for path in naming:
        del store[path]
    server = Zoo("ok", store)
    try:
        first = build(reference.project, tmp_path / "cache-1", server.url)
        assert first.outcomes["tiny/cpu/libtiny.so"] == "ran"
        assert server.store[f"/cas/{digest}"] == library
        second = build(reference.project, tmp_path / "cache-2", server.url)
    finally:
        server.stop()
    check(first, reference)
    check(second, reference)
    assert set(second.outcomes.values()) == {"remote"}


def test_fifos_and_links_in_the_local_cache_are_misses(
    reference: Reference, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    build(reference.project, cache, None)
    outside = tmp_path / "outside"
    outside.mkdir()
    replaced = 0
    for path in sorted(p for p in cache.rglob("*") if p.is_file()):
        if path.name.endswith(".lock"):
            continue
        data = path.read_bytes()
        path.unlink()
        if replaced % 3 == 2:  # a link to the right bytes, outside the cache: not followed
            (outside / path.name).write_bytes(data)
            path.symlink_to(outside / path.name)
        else:
            os.mkfifo(path)  # a read of it would wait for a writer for ever
        replaced += 1
    os.mkfifo(cache / "ac" / "zz")  # where a folder belongs
    assert replaced > 10
    again = build(reference.project, cache, None)
    check(again, reference)
    assert set(again.outcomes.values()) == {"ran"}
    # Each store replaced what was there: the next build hits.
    third = build(reference.project, cache, None)
    check(third, reference)
    assert set(third.outcomes.values()) == {"local"}


def test_a_request_has_a_total_deadline(tmp_path: Path) -> None:
    """Bytes a second keep a per-read timeout happy for ever; the deadline still ends it."""
    server = Zoo("drip")
    try:
        remote = RemoteCache.from_settings(server.url, False, tmp_path / "state", timeout=1.5)
        start = time.monotonic()
        assert remote.get_blob("0" * 64) is None
        assert time.monotonic() - start < 3
        assert remote.is_down()
        start = time.monotonic()
        assert remote.get_action("1" * 64) is None  # down: not asked again
        assert time.monotonic() - start < 0.1 and len(server.requests) == 1
    finally:
        server.stop()
    (line,) = remote.warnings()
    assert "no answer within 1.5 s" in line


def test_server_text_is_shown_printable_and_short() -> None:
    assert printable("a\x1b[31mb\x00\xffc\n") == "a?[31mb?c?"
    assert printable("x" * 500, 20) == "x" * 17 + "..."


def test_an_oversized_action_entry_is_not_read(tmp_path: Path) -> None:
    server = Zoo("huge")
    try:
        remote = RemoteCache.from_settings(server.url, False, tmp_path / "state", timeout=5)
        start = time.monotonic()
        assert remote.get_action("2" * 64) is None
        assert time.monotonic() - start < 1 and not remote.is_down()
    finally:
        server.stop()
    (line,) = remote.warnings()
    assert "1099511627776 bytes" in line and "\x1b" not in line


def test_the_timeout_setting(tmp_path: Path) -> None:
    from buildgen.cache.settings import SettingsError, resolve_settings

    env = {"BUILDGEN_REMOTE_CACHE_TIMEOUT": "2.5"}
    assert resolve_settings({}, env).remote_timeout == 2.5
    assert resolve_settings({}, {}).remote_timeout is None
    for bad in ("0", "-1", "soon", "nan", "inf"):
        with pytest.raises(SettingsError, match="BUILDGEN_REMOTE_CACHE_TIMEOUT"):
            resolve_settings({}, {"BUILDGEN_REMOTE_CACHE_TIMEOUT": bad})
    remote = RemoteCache.from_settings("http://127.0.0.1:9", False, tmp_path, timeout=0.5)
    assert (remote.timeout, remote.connect_timeout, remote.read_timeout) == (0.5, 0.5, 0.5)
