"""RemoteCache against a real nginx (WebDAV): roundtrips, verification, outages, read-only."""

from __future__ import annotations

import hashlib
import http.server
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from nginx import NginxServer

from buildgen.cache.model import ActionResult, OutputFile
from buildgen.cache.remote import (
    DOWN_MARKER,
    RemoteCache,
    remote_warnings,
    reset_remote_state,
)
from buildgen.cache.shared_state import MARKER_TTL


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


KEY = sha(b"an action key")


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests see no credentials of the machine they run on."""
    for name in ("BUILDGEN_REMOTE_CACHE_HEADER", "BUILDGEN_REMOTE_CACHE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))


def client(url: str, state: Path, read_only: bool = False) -> RemoteCache:
    return RemoteCache.from_settings(url, read_only, state)


def test_action_and_blob_roundtrip(nginx: NginxServer, tmp_path: Path) -> None:
    remote = client(nginx.url, tmp_path / "state")
    data = b"\x7fELF pretend library"
    assert remote.get_action(KEY) is None  # 404 is a miss, not an outage
    assert remote.get_blob(sha(data)) is None
    assert not remote.has_blob(sha(data))

    result = ActionResult((OutputFile("m/libm.so", sha(data), len(data), executable=True),))
    remote.put_blob(sha(data), data)
    remote.put_action(KEY, result)

    assert remote.has_blob(sha(data))
    assert remote.get_blob(sha(data)) == data
    assert remote.get_action(KEY) == result
    assert nginx.cas_path(sha(data)).read_bytes() == data
    assert not (tmp_path / "state" / DOWN_MARKER).exists()
    assert remote.warnings() == []


def test_upload_action_sends_blobs_first_and_skips_those_the_server_has(
    nginx: NginxServer, tmp_path: Path
) -> None:
    build = tmp_path / "build"
    (build / "m").mkdir(parents=True)
    files = {"m/a.o": b"object a", "m/b.o": b"object b"}
    for path, data in files.items():
        (build / path).write_bytes(data)
    result = ActionResult(tuple(OutputFile(p, sha(d), len(d)) for p, d in files.items()))
    remote = client(nginx.url, tmp_path / "state")
    remote.put_blob(sha(b"object a"), b"object a")  # already there: not sent again

    remote.upload_action(KEY, result, build)

    puts = [line.split()[1] for line in nginx.requests(5) if line.startswith("PUT")]
    assert puts == [f"/cas/{sha(b'object a')}", f"/cas/{sha(b'object b')}", f"/ac/{KEY}"]
    assert client(nginx.url, tmp_path / "other").get_action(KEY) == result


def test_a_corrupted_blob_is_discarded_reported_and_healed(
    nginx: NginxServer, tmp_path: Path
) -> None:
    build, state = tmp_path / "build", tmp_path / "state"
    build.mkdir()
    data = b"the right bytes"
    (build / "out.o").write_bytes(data)
    result = ActionResult((OutputFile("out.o", sha(data), len(data)),))
    remote = client(nginx.url, state)
    remote.upload_action(KEY, result, build)
    nginx.cas_path(sha(data)).write_bytes(b"the wrong bytes")  # nginx never checks

    assert remote.get_action(KEY) == result  # the entry itself is fine
    assert remote.get_blob(sha(data)) is None
    (warning,) = remote.warnings()
    assert sha(data) in warning and "failed verification" in warning

    # The action ran locally and uploads again: the bad blob is replaced though HEAD finds one.
    remote.upload_action(KEY, result, build)
    assert nginx.cas_path(sha(data)).read_bytes() == data
    assert client(nginx.url, tmp_path / "next-build").get_blob(sha(data)) == data


@pytest.mark.parametrize(
    "body",
    [b"\xff\xff garbage", b"\x12\x47\x0a\x01e\x12\x42\x0a\x40" + b"z" * 64],  # bad digest
)
def test_an_unusable_action_entry_is_a_reported_miss(
    nginx: NginxServer, tmp_path: Path, body: bytes
) -> None:
    nginx.ac_path(KEY).write_bytes(body)
    remote = client(nginx.url, tmp_path / "state")
    assert remote.get_action(KEY) is None
    assert [KEY in w for w in remote.warnings()] == [True]


def test_an_entry_whose_outputs_escape_the_build_dir_is_refused(
    nginx: NginxServer, tmp_path: Path
) -> None:
    remote = client(nginx.url, tmp_path / "state")
    for path in ("../evil.so", "/etc/evil", "a/../../b", "a//b"):
        remote.put_action(KEY, ActionResult((OutputFile(path, sha(b""), 0),)))
        assert remote.get_action(KEY) is None, path


def test_a_stopped_server_marks_the_remote_down_once(nginx: NginxServer, tmp_path: Path) -> None:
    state = tmp_path / "state"
    remote = client(nginx.url, state)
    nginx.stop()
    assert remote.get_action(KEY) is None  # connection refused: no exception
    marker = (state / DOWN_MARKER).read_text()
    assert nginx.url in marker and "GET /ac/" in marker

    # Another process of the same build (a new object) skips the remote without connecting.
    other = client(nginx.url, state)
    other.put_blob(sha(b"x"), b"x")
    assert not other.has_blob(sha(b"x"))
    assert other.get_blob(sha(b"x")) is None
    assert (state / DOWN_MARKER).read_text() == marker  # the first cause is kept
    (line,) = remote_warnings(state)
    assert "unreachable" in line and "local cache only" in line


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections (the kernel's backlog) but never answers: a hung server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_hung_server_costs_one_timeout_per_build(silent_server: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    remote = RemoteCache(silent_server, False, state, connect_timeout=0.5, read_timeout=0.5)
    start = time.monotonic()
    assert remote.get_action(KEY) is None
    assert 0.4 < time.monotonic() - start < 5
    assert "timed out" in (state / DOWN_MARKER).read_text()
    start = time.monotonic()
    for _ in range(20):
        assert remote.get_blob(KEY) is None
    assert time.monotonic() - start < 0.5


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_https_verifies_the_server_certificate(
    make_nginx: Callable[..., NginxServer],
    certificate: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = make_nginx(tls=certificate)
    assert server.url.startswith("https://")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    assert client(server.url, tmp_path / "s1").get_blob(KEY) is None  # an unknown issuer
    assert "CERTIFICATE_VERIFY_FAILED" in (tmp_path / "s1" / DOWN_MARKER).read_text()

    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))  # e.g. a company CA in CI
    remote = client(server.url, tmp_path / "s2")
    remote.put_blob(sha(b"tls"), b"tls")
    assert remote.get_blob(sha(b"tls")) == b"tls"
    assert server.cas_path(sha(b"tls")).read_bytes() == b"tls"


class _Status503(http.server.BaseHTTPRequestHandler):
    """GET /ac: 503, GET /cas: 401, PUT: 413 (too large), HEAD: 404."""

    def _answer(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming convention
        self._answer(503 if self.path.startswith("/ac/") else 401)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(404)

    def do_PUT(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(413)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.parametrize(("path", "status"), [("ac", "503"), ("cas", "401")])
def test_server_errors_and_refused_credentials_mark_the_remote_down(
    tmp_path: Path, path: str, status: str
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Status503)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        remote = client(f"http://127.0.0.1:{server.server_address[1]}", tmp_path / "s")
        got = remote.get_action(KEY) if path == "ac" else remote.get_blob(KEY)
        assert got is None
        assert f"HTTP {status}" in (tmp_path / "s" / DOWN_MARKER).read_text()
    finally:
        server.shutdown()
        server.server_close()


def test_an_upload_the_server_refuses_is_reported_but_keeps_the_remote_up(
    tmp_path: Path,
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Status503)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        remote = client(f"http://127.0.0.1:{server.server_address[1]}", tmp_path / "s")
        remote.put_blob(sha(b"big"), b"big")
        assert not remote.is_down() and not remote.has_blob(sha(b"big"))  # HEAD still asked
        assert remote.warnings() == [f"remote cache rejected PUT /cas/{sha(b'big')}: HTTP 413"]
    finally:
        server.shutdown()
        server.server_close()


def test_an_unwritable_state_dir_costs_the_report_not_the_build(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where the state folder should be
    remote = client("http://127.0.0.1:9", blocker / "state")  # port 9: nothing listens
    assert remote.get_action(KEY) is None
    assert remote.warnings() == []


def test_an_old_marker_expires_and_reset_clears_the_state(
    nginx: NginxServer, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / DOWN_MARKER).write_text("http://x\told\n")
    remote = client(nginx.url, state)
    assert remote.is_down() and not remote.has_blob(KEY)
    old = time.time() - MARKER_TTL - 1
    os.utime(state / DOWN_MARKER, (old, old))  # a build driven by plain ninja, long ago
    assert not remote.is_down()
    nginx.cas_path(KEY).write_bytes(b"bad")
    assert remote.get_blob(KEY) is None
    assert len(remote.warnings()) == 2
    reset_remote_state(state)
    assert remote.warnings() == []


def test_read_only_writes_nothing_to_the_server(nginx: NginxServer, tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    (build / "f").write_bytes(b"f")
    result = ActionResult((OutputFile("f", sha(b"f"), 1),))
    writer = client(nginx.url, tmp_path / "w")
    writer.upload_action(KEY, result, build)
    before = sorted(p.relative_to(nginx.store) for p in nginx.store.rglob("*"))

    reader = client(nginx.url, tmp_path / "r", read_only=True)
    other = sha(b"g")
    reader.put_blob(other, b"g")
    reader.put_action(other, result)
    reader.upload_action(other, result, build)
    assert reader.get_action(KEY) == result and reader.get_blob(sha(b"f")) == b"f"

    assert sorted(p.relative_to(nginx.store) for p in nginx.store.rglob("*")) == before
    assert [line for line in nginx.requests(5)[3:] if not line.startswith(("GET", "HEAD"))] == []


def test_a_url_prefix_is_kept(nginx: NginxServer, tmp_path: Path) -> None:
    remote = client(nginx.url + "/team-a/", tmp_path / "state")
    remote.put_blob(sha(b"p"), b"p")
    assert (nginx.store / "team-a" / "cas" / sha(b"p")).read_bytes() == b"p"
    assert remote.get_blob(sha(b"p")) == b"p"


def _worker(args: tuple[str, str, int]) -> bool:
    url, state, i = args
    remote = RemoteCache.from_settings(url, False, Path(state))
    shared, own = b"shared blob", f"blob {i}".encode()
    remote.put_blob(sha(shared), shared)
    remote.put_blob(sha(own), own)
    key = sha(f"key {i % 4}".encode())  # several processes write the same AC entries
    remote.put_action(key, ActionResult((OutputFile("o", sha(shared), len(shared)),)))
    return remote.get_blob(sha(own)) == own and remote.get_action(key) is not None


def test_many_processes_share_one_server_and_one_state_dir(
    nginx: NginxServer, tmp_path: Path
) -> None:
    state = str(tmp_path / "state")
    with ProcessPoolExecutor(8) as pool:
        assert all(pool.map(_worker, [(nginx.url, state, i) for i in range(32)]))
        assert remote_warnings(Path(state)) == []
        nginx.stop()  # now they all see the outage at once: one marker, one line
        assert not any(pool.map(_worker, [(nginx.url, state, i) for i in range(16)]))
    (line,) = remote_warnings(Path(state))
    assert "unreachable" in line


def test_a_missing_nginx_skips_locally_but_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    import nginx

    monkeypatch.setattr(nginx, "find_nginx", lambda: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install nginx"):
        nginx.require_nginx()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must have it"):
        nginx.require_nginx()
