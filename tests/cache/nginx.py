"""A real nginx with WebDAV on loopback: a Bazel-HTTP-cache-style server for tests and benches.

Plain Python (no pytest) so bench/bench_cache.py imports it too; the pytest fixtures that
skip or fail when nginx is missing are in tests/cache/conftest.py. Everything nginx writes
(store, logs, pid, temp bodies) stays under one folder; nothing under /etc or /var is used.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = "install it with `apt-get install nginx` (Debian/Ubuntu)"


def find_nginx() -> str | None:
    """The nginx binary; Debian puts it in /usr/sbin, often not on a normal user's PATH."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


def require_nginx() -> None:
    """In a test: skip when nginx is missing, but fail when env CI is set, because .ci/run
    installs it there, so a missing nginx means a broken CI, not a reason to skip."""
    import pytest  # here, so the benchmark imports this module without pytest

    if find_nginx() is None:
        message = f"these tests need a real nginx; {INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must have it: .ci/run installs it)")
        pytest.skip(message)


@dataclass(frozen=True)
class NginxServer:
    url: str  # http://127.0.0.1:<port>, no trailing slash
    store: Path  # the WebDAV root: <store>/ac/<key>, <store>/cas/<sha256>
    access_log: Path
    error_log: Path
    process: subprocess.Popen[bytes]

    def cas_path(self, digest: str) -> Path:
        return self.store / "cas" / digest

    def ac_path(self, key: str) -> Path:
        return self.store / "ac" / key

    def requests(self, at_least: int = 0) -> list[str]:
        """Access log lines: '<method> <uri> <status> <bytes> auth="<Authorization>"'.

        nginx logs a request just after answering it, so a client can be faster than the
        log: wait (up to 10 s) for ``at_least`` lines, then until the log stops growing.
        """
        deadline = time.monotonic() + 10
        previous: list[str] | None = None
        while True:
            text = self.access_log.read_text() if self.access_log.exists() else ""
            lines = text.splitlines()
            enough = len(lines) >= at_least
            if (enough and lines == previous) or time.monotonic() > deadline:
                return lines
            previous = lines if enough else None
            time.sleep(0.05)

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """Fast shutdown (SIGTERM): in-flight requests are cut, as when a server dies."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(root: Path, port: int, log_auth: bool, tls: tuple[Path, Path] | None) -> str:
    tmp = root / "tmp"
    # `user` is only honoured when the master runs as root; then workers would default to
    # `nobody`, who cannot enter pytest's 0700 tmp folders, so name the current user instead.
    user = ""
    if os.geteuid() == 0:
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};"
    auth = ' auth="$http_authorization"' if log_auth else ""
    temp_paths = "\n".join(
        f"    {kind}_temp_path {tmp / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")  # fmt: skip
    )
    listen_tls = ""
    if tls is not None:
        listen_tls = (
            f" ssl;\n        ssl_certificate {tls[0]};\n        ssl_certificate_key {tls[1]}"
        )
    # One worker: nginx logs a request just after answering it, and two workers can each
    # log in either order, so a client's sequence of requests could show up swapped.
    return f"""\
{user}
daemon off;
worker_processes 1;
pid {root / "nginx.pid"};
error_log {root / "error.log"} info;
events {{ worker_connections 256; }}
http {{
    log_format cache '$request_method $uri $status $body_bytes_sent{auth}';
    access_log {root / "access.log"} cache;
{temp_paths}
    server {{
        listen 127.0.0.1:{port}{listen_tls};
        location / {{
            root {root / "store"};
            dav_methods PUT DELETE;
            create_full_put_path on;
            dav_access user:rw group:rw all:r;
            client_max_body_size 1g;
        }}
    }}
}}
"""


def _wait_until_listening(port: int, process: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return True
        time.sleep(0.02)
    return False


def start_nginx(
    root: Path,
    *,
    log_auth: bool = False,
    tls: tuple[Path, Path] | None = None,
    binary: str | None = None,
) -> NginxServer:
    """Start nginx serving ``root/store`` on a free loopback port; returns once it answers.

    ``log_auth`` adds the Authorization header to the access log (tests of credentials only);
    ``tls`` (certificate, key) serves https.
    """
    binary = binary or find_nginx()
    if binary is None:
        raise FileNotFoundError(f"nginx not found; {INSTALL_HINT}")
    root = root.resolve()
    for sub in ("store/ac", "store/cas", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    last_error = ""
    for _attempt in range(3):  # another process may grab the free port before nginx binds it
        port = _free_port()
        conf = root / "nginx.conf"
        conf.write_text(_config(root, port, log_auth, tls))
        # -e: the error log before the config is read (else /var/log/nginx/error.log).
        process = subprocess.Popen(
            [binary, "-p", str(root), "-c", str(conf), "-e", str(root / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if _wait_until_listening(port, process, timeout=10.0):
            scheme = "https" if tls else "http"
            return NginxServer(
                f"{scheme}://127.0.0.1:{port}", root / "store", root / "access.log",
                root / "error.log", process,
            )  # fmt: skip
        process.kill()
        _, stderr = process.communicate()
        last_error = stderr.decode(errors="replace").strip()
        if "Address already in use" not in last_error:
            break
    raise RuntimeError(f"nginx did not start: {last_error}")


@contextlib.contextmanager
def running_nginx(root: Path, *, log_auth: bool = False) -> Iterator[NginxServer]:
    server = start_nginx(root, log_auth=log_auth)
    try:
        yield server
    finally:
        server.stop()
