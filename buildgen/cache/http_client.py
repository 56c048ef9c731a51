"""One request to an HTTP cache server, with a deadline on the whole of it, and the
credentials it sends: the transport under RemoteCache (remote.py), which decides what a
failure means for the build.

Plain http.client rather than urllib: it lets the connect timeout (short) differ from the
read timeout (long enough for a large blob), and one connection per request is all a
process running one action needs. A watchdog thread shuts the socket down at the deadline,
which ends any read at once: a per-read timeout alone lets a server that drips bytes hold
a request for ever. Only a 200 GET's body is read, and never past the caller's limit.

Credentials are read from the environment or netrc at request time and kept nowhere else.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import netrc
import os
import re
import socket
import ssl
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from buildgen.cache.shared_state import printable
from buildgen.errors import BuildgenError, Diagnostic

ENV_HEADER = "BUILDGEN_REMOTE_CACHE_HEADER"  # a whole header: "Authorization: Bearer xyz"
ENV_TOKEN = "BUILDGEN_REMOTE_CACHE_TOKEN"  # sent as "Authorization: Bearer <token>"

_HEADER = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(\S[^\r\n]*)")
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Deadlines:
    connect: float  # s to accept the connection
    read: float  # s between bytes
    total: float  # s for the whole request


@dataclass(frozen=True)
class Reply:
    status: int
    reason: str
    body: bytes  # a 200 GET's, else empty
    length: int | None  # the Content-Length the server sent, if a number


class BodyTooLarge(Exception):
    """A 200 GET's body longer than the caller's limit: not read."""

    def __init__(self, length: int | None):
        super().__init__(length)
        self.length = length  # what the server declared, when it did


class NoAnswer(Exception):
    """The request failed (refused, reset, cut off, past the deadline); str(): the cause,
    printable and short (an exception's text may quote the server's bytes)."""


class _Truncated(http.client.HTTPException):
    """A body that ended before its Content-Length: the connection was cut."""


def send(url: str, method: str, path: str, body: bytes | None, limit: int,
         deadlines: Deadlines) -> Reply:
    """`method` `url` + `path` (with `body`), one connection, at most `deadlines.total`
    seconds in all. Raises BodyTooLarge, NoAnswer."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(
            host, parts.port, timeout=deadlines.connect, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(host, parts.port, timeout=deadlines.connect)
    headers = {"Connection": "close", **auth_headers(host, strict=False)}
    if body is not None:
        headers["Content-Type"] = "application/octet-stream"
    watchdog = _Watchdog(conn, deadlines.total)
    length: int | None = None
    try:
        conn.connect()
        if conn.sock is not None:
            conn.sock.settimeout(min(deadlines.read, deadlines.total))
        conn.request(method, parts.path + path, body=body, headers=headers)
        response = conn.getresponse()
        length = _content_length(response)
        data = b""
        if method == "GET" and response.status == 200:
            data = _read_body(response, limit)
        return Reply(response.status, response.reason, data, length)
    except _TooLarge:
        raise BodyTooLarge(length) from None
    except (OSError, http.client.HTTPException, ValueError) as e:
        # Socket/TLS errors are OSErrors; ValueError: a header http.client cannot parse.
        cause = f"no answer within {deadlines.total:g} s" if watchdog.fired else _describe(e)
        raise NoAnswer(cause) from None
    finally:
        watchdog.stop()
        conn.close()


class _TooLarge(Exception):
    """A response body longer than the caller's limit: read no further."""


class _Watchdog:
    """Shuts ``conn``'s socket down after ``seconds`` unless stopped first."""

    def __init__(self, conn: http.client.HTTPConnection, seconds: float):
        self.conn = conn
        self.fired = False
        self._lock = threading.Lock()
        self._stopped = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self.fired = True
            sock = self.conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        """After this returns, the watchdog touches the connection no more (it may close)."""
        with self._lock:
            self._stopped = True
        self._timer.cancel()


def _content_length(response: http.client.HTTPResponse) -> int | None:
    """The Content-Length the server sent (http.client says 0 for any HEAD), if a number."""
    value = (response.getheader("Content-Length") or "").strip()
    return int(value) if value.isdigit() and value.isascii() else None


def _read_body(response: http.client.HTTPResponse, limit: int) -> bytes:
    """The whole body, at most ``limit`` bytes (else _TooLarge); _Truncated when it ends
    before its Content-Length."""
    declared = response.length
    if declared is not None and declared > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = response.read(min(_CHUNK, limit - total + 1))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise _TooLarge
    if declared is not None and total != declared:
        raise _Truncated(f"the body ended after {total} of {declared} bytes")
    return b"".join(chunks)


def auth_headers(host: str, *, strict: bool) -> dict[str, str]:
    """The credential header, first of: $BUILDGEN_REMOTE_CACHE_HEADER, _TOKEN, netrc (Basic).

    ``strict`` (at settings time) turns malformed settings into errors; at request time a
    malformed setting sends no credentials and the server's 401 marks the remote down.
    Error messages never quote the values.
    """
    header = os.environ.get(ENV_HEADER, "")
    if header:
        match = _HEADER.fullmatch(header.strip())
        if match:
            return {match.group(1): match.group(2).strip()}
        if strict:
            raise error(f"${ENV_HEADER} must look like 'Name: value' on one line")
        return {}
    token = os.environ.get(ENV_TOKEN, "").strip()
    if token:
        if re.fullmatch(r"[\x21-\x7e]+", token):
            return {"Authorization": f"Bearer {token}"}
        if strict:
            raise error(f"${ENV_TOKEN} must be printable ASCII without spaces")
        return {}
    path = Path(os.environ.get("NETRC") or Path.home() / ".netrc")
    if not path.is_file():
        return {}
    try:
        entry = netrc.netrc(str(path)).authenticators(host)
    except (netrc.NetrcParseError, OSError) as e:
        if strict:
            # Not the parser's message: it may quote a token of the file.
            line = getattr(e, "lineno", None)
            where = f"{path}:{line}" if line else str(path)
            raise error(
                f"{where}: cannot read the netrc file", "check its syntax, and chmod 600 it"
            ) from None
        return {}
    if entry is None:
        return {}
    login, _, password = entry
    basic = base64.b64encode(f"{login}:{password or ''}".encode()).decode("ascii")
    return {"Authorization": f"Basic {basic}"}


def _describe(e: BaseException) -> str:
    """What went wrong, for a message: an exception's text may quote the server's bytes."""
    if isinstance(e, TimeoutError):
        return "timed out"
    return printable(str(e) or type(e).__name__, 80)


def error(message: str, hint: str | None = None) -> BuildgenError:
    return BuildgenError(Diagnostic(message, hint=hint))
