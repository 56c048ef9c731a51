"""Client of the Bazel HTTP remote-cache protocol: ``/ac/<key>`` and ``/cas/<sha256>``.

Any server of that protocol works (bazel-remote, nginx with WebDAV, hosted caches). The
server is trusted for nothing: every CAS body is checked against its sha256 and the size the
entry names (nginx does not verify what it stores), an AC entry must decode to sane outputs
and be small, a body longer than expected is cut off unread, and anything wrong is a miss.
Whatever text a server sends (a reason phrase, a bad status line) reaches the build log only
as printable ASCII, shortened (``printable``): raw bytes would garble a terminal.

A remote cache is an optimisation, so it never fails a build and never holds one up for
long. Every request has a total deadline (``$BUILDGEN_REMOTE_CACHE_TIMEOUT`` seconds,
default 60; connecting gets at most 2 s), not just a per-read timeout, so a server that
drips a byte every few seconds costs one deadline. The first network error of a build
(refused, timeout, reset, cut-off body, 5xx, auth) writes ``<state_dir>/remote-down`` and
prints one warning line; every later request of the same process, and of every later action
of the same build, sees the marker and skips the remote instead of waiting for its own
timeout. Each action runs in its own process: the marker and one file per event under
``<state_dir>/remote-events/`` (all written atomically) are what processes share, and
``remote_warnings`` turns them into the build summary's lines; the object itself only
remembers, for its own process, that the server is down and which blobs it served damaged.

A blob the server served damaged (or an entry whose blobs could not be had) is healed: the
action runs, and its fresh outputs are uploaded again, overwriting what the server holds
(``upload_action(..., force=True)``), though a HEAD request says the server has them.

Credentials are read from the environment or netrc at request time and kept nowhere else.

A safe set-up. ``read_only`` is enforced by this client only: a job that holds write
credentials can write whatever it likes, and whatever it writes every other build restores
into its libraries. So the server must enforce who writes:

- Give readers and writers separate credentials. Untrusted jobs (pull requests, forks,
  developer machines) get read credentials only, or none, and set
  ``BUILDGEN_REMOTE_CACHE_READ_ONLY=1``.
- Make the server refuse their writes. With nginx, serve readers from a location that allows
  nothing else: ``location / { limit_except GET HEAD { deny all; } }``; give writers another
  server or location with ``dav_methods PUT`` behind ``auth_basic``. bazel-remote: run it
  with ``--htpasswd_file`` (and without ``--allow_unauthenticated_reads`` where reads must
  be private too), and hand the htpasswd user to trusted jobs only.
- Only trusted branches (main, release branches, after review) write, from CI jobs whose
  secrets a pull request cannot reach.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import netrc
import os
import re
import socket
import ssl
import sys
import threading
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from buildgen.cache.model import ActionResult
from buildgen.cache.protocol import (
    ProtocolError,
    decode_action_result,
    encode_action_result,
    validate_action_result,
)
from buildgen.cache.shared_state import SharedState, printable
from buildgen.errors import BuildgenError, Diagnostic

ENV_HEADER = "BUILDGEN_REMOTE_CACHE_HEADER"  # a whole header: "Authorization: Bearer xyz"
ENV_TOKEN = "BUILDGEN_REMOTE_CACHE_TOKEN"  # sent as "Authorization: Bearer <token>"
CONNECT_TIMEOUT = 2.0  # s: a cache that is slow to accept is as good as down
READ_TIMEOUT = 30.0  # s between bytes, so a large library still downloads
TOTAL_TIMEOUT = 60.0  # s for a whole request: a dripping server is as good as down
DOWN_MARKER = "remote-down"
EVENTS_DIR = "remote-events"
# Builds driven by plain `ninja` never call reset_remote_state: an old marker expires instead.
# buildgen's AC entries name a few outputs (a few hundred bytes): more is not an entry of ours.
MAX_ACTION_BYTES = 1 << 20
# A blob whose size nothing names (none of buildgen's lookups): a library is far smaller.
MAX_BLOB_BYTES = 4 << 30

_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEADER = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(\S[^\r\n]*)")
_CHUNK = 1 << 16


class _TooLarge(Exception):
    """A response body longer than the caller's limit: read no further."""


class _Truncated(http.client.HTTPException):
    """A body that ended before its Content-Length: the connection was cut."""


@dataclass(frozen=True)
class RemoteCache:
    url: str  # scheme://host[:port][/prefix], never with credentials
    read_only: bool
    state_dir: Path
    connect_timeout: float = CONNECT_TIMEOUT
    read_timeout: float = READ_TIMEOUT
    timeout: float = TOTAL_TIMEOUT  # the deadline of one whole request
    # This process's memory (the state files are shared with the others): the server is
    # down (a one-element list once it is), and the blobs it served that failed verification.
    _down: list[str] = field(default_factory=list, init=False, repr=False, compare=False)
    _damaged: set[str] = field(default_factory=set, init=False, repr=False, compare=False)

    @classmethod
    def from_settings(
        cls, url: str, read_only: bool, state_dir: Path, timeout: float | None = None
    ) -> RemoteCache:
        """Validate the URL and the credential settings now, so mistakes are errors, not misses.

        ``timeout`` (``$BUILDGEN_REMOTE_CACHE_TIMEOUT``) bounds each whole request; the
        connect and per-read timeouts are never longer than it.
        """
        # The messages never echo the URL: it may hold a secret in the wrong place.
        parts = urllib.parse.urlsplit(url.strip())
        if parts.username is not None or parts.password is not None:
            raise _error(
                "the remote cache URL must not contain credentials (user:password@): they "
                "would end up in logs and build files",
                f"put them in ~/.netrc ('machine {parts.hostname} login USER password PASS'), "
                f"or set {ENV_TOKEN} or {ENV_HEADER}",
            )
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise _error("the remote cache URL must start with http:// or https:// and a host")
        if parts.query or parts.fragment:
            raise _error("the remote cache URL must not have a query (?...) or a fragment (#...)")
        try:
            parts.port  # noqa: B018 - a bad port raises here, not at the first request
        except ValueError:
            raise _error("the remote cache URL's port is not a number in 1-65535") from None
        _auth_headers(parts.hostname, strict=True)
        base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
        if timeout is None:
            return cls(base, read_only, Path(state_dir))
        if not timeout > 0:
            raise _error("the remote cache timeout must be a positive number of seconds")
        return cls(
            base, read_only, Path(state_dir),
            connect_timeout=min(CONNECT_TIMEOUT, timeout),
            read_timeout=min(READ_TIMEOUT, timeout),
            timeout=timeout,
        )  # fmt: skip

    # -- the protocol ------------------------------------------------------------------------

    def get_action(self, key: str) -> ActionResult | None:
        """The AC entry for ``key``; None for a miss, an unusable entry, an unreachable server."""
        body = self._get(f"/ac/{_checked(key)}", MAX_ACTION_BYTES)
        if body is None:
            return None
        try:
            result = decode_action_result(body)
            validate_action_result(result)
        except ProtocolError as e:
            self._record("bad-ac", key, f"remote cache entry /ac/{key} is unusable ({e}): ignored")
            return None
        return result

    def put_action(self, key: str, result: ActionResult) -> None:
        """Store the AC entry. Upload its blobs first (``upload_action`` does both in order)."""
        if not self.read_only:
            self._put(f"/ac/{_checked(key)}", encode_action_result(result))

    def get_blob(self, digest: str, size: int | None = None) -> bytes | None:
        """The blob's bytes if the server has them and they hash to ``digest`` (and are
        ``size`` bytes long, when given: a longer body is not read past it), else None."""
        limit = MAX_BLOB_BYTES if size is None else size
        body = self._get(f"/cas/{_checked(digest)}", limit)
        if body is None:
            return None
        actual = hashlib.sha256(body).hexdigest()
        if actual != digest or (size is not None and len(body) != size):
            self._damaged.add(digest)
            self._record(
                "corrupt", digest,
                f"remote cache blob {digest} failed verification (its {len(body)} bytes hash "
                f"to {actual}): discarded, the action ran locally",
            )  # fmt: skip
            return None
        return body

    def put_blob(self, digest: str, data: bytes) -> None:
        if not self.read_only:
            self._put(f"/cas/{_checked(digest)}", data)

    def has_blob(self, digest: str, size: int | None = None) -> bool:
        """Whether the server says it has the blob (of ``size`` bytes, when it says a size)."""
        response = self._request("HEAD", f"/cas/{_checked(digest)}")
        if response is None or response[0] != 200:
            return False
        return size is None or response[2] is None or response[2] == size

    def upload_action(
        self, key: str, result: ActionResult, root: Path, *, force: bool = False
    ) -> None:
        """Upload the outputs (files under ``root``) the server lacks, then the AC entry.

        The entry goes last so no reader ever sees an entry whose blobs are missing. A blob
        found damaged during this build (in this process, or reported by another), one whose
        size on the server is wrong, and with ``force`` every blob (the action ran because
        what the server gave for it was unusable) is uploaded even though the server has one:
        the new bytes overwrite the bad ones, so the cache heals.
        """
        if self.read_only or self.is_down():
            return
        for f in result.outputs:
            if force or self._was_damaged(f.digest) or not self.has_blob(f.digest, f.size):
                self.put_blob(f.digest, (root / f.path).read_bytes())
        self.put_action(key, result)

    # -- shared state ------------------------------------------------------------------------

    @property
    def shared(self) -> SharedState:
        return shared_state(self.state_dir)

    def is_down(self) -> bool:
        return bool(self._down) or self.shared.is_down()

    def warnings(self) -> list[str]:
        return remote_warnings(self.state_dir)

    # The state files are reports: a build dir that cannot take them costs the report only.

    def _mark_down(self, reason: str) -> None:
        reason = printable(reason)
        first = not self.is_down()  # the first failure names the cause; later ones add nothing
        self._down.append(reason)
        if first:
            self.shared.mark_down(f"{self.url}\t{reason}\n")
            # One line in the build log (ninja shows it with the action that hit it).
            with contextlib.suppress(OSError, ValueError):
                print(
                    f"buildgen cache: warning: remote cache {printable(self.url)} is "
                    f"unreachable ({reason}): using the local cache only for a while",
                    file=sys.stderr, flush=True,
                )  # fmt: skip

    def _record(self, kind: str, subject: str, line: str) -> None:
        self.shared.record(f"{kind}-{subject}", line)

    def _seen(self, kind: str, subject: str) -> bool:
        return self.shared.seen(f"{kind}-{subject}")

    def _was_damaged(self, digest: str) -> bool:
        return digest in self._damaged or self._seen("corrupt", digest)

    # -- HTTP ----------------------------------------------------------------------------------

    def _get(self, path: str, limit: int) -> bytes | None:
        response = self._request("GET", path, limit=limit)
        return response[1] if response is not None and response[0] == 200 else None

    def _put(self, path: str, data: bytes) -> None:
        response = self._request("PUT", path, data)
        if response is not None and response[0] in (400, 413):
            # This entry only (too large, or refused by a validating server such as
            # bazel-remote): the server is fine for the others.
            subject = path.rsplit("/", 1)[-1]
            self._record(
                "rejected", subject, f"remote cache rejected PUT {path}: HTTP {response[0]}"
            )

    def _request(
        self, method: str, path: str, body: bytes | None = None, limit: int = 0
    ) -> tuple[int, bytes, int | None] | None:
        """(status, body, Content-Length) for 2xx, 404 and the per-entry PUT refusals; None
        once the server is down, and for a GET body over ``limit`` bytes (a miss, reported).

        Only a 200 GET's body is read. Plain http.client rather than urllib: it lets the
        connect timeout (short) differ from the read timeout (long enough for a large blob),
        and one connection per request is all a process running one action needs. A
        watchdog thread shuts the socket down at the deadline, which ends any read at once:
        a per-read timeout alone lets a server that drips bytes hold a request for ever.
        """
        if self.is_down():
            return None
        parts = urllib.parse.urlsplit(self.url)
        host = parts.hostname or ""
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(
                host, parts.port, timeout=self.connect_timeout, context=ssl.create_default_context()
            )
        else:
            conn = http.client.HTTPConnection(host, parts.port, timeout=self.connect_timeout)
        headers = {"Connection": "close", **_auth_headers(host, strict=False)}
        if body is not None:
            headers["Content-Type"] = "application/octet-stream"
        watchdog = _Watchdog(conn, self.timeout)
        length: int | None = None
        try:
            conn.connect()
            if conn.sock is not None:
                conn.sock.settimeout(min(self.read_timeout, self.timeout))
            conn.request(method, parts.path + path, body=body, headers=headers)
            response = conn.getresponse()
            status, reason = response.status, response.reason
            length = _content_length(response)
            data = b""
            if method == "GET" and status == 200:
                data = _read_body(response, limit)
        except _TooLarge:
            what = f"{length} bytes" if length is not None else "a longer body"
            self._record(
                "too-large", path.rsplit("/", 1)[-1],
                f"remote cache answered {method} {path} with {what}, more than the "
                f"{limit} expected: not read, a miss",
            )  # fmt: skip
            return None
        except (OSError, http.client.HTTPException, ValueError) as e:
            # Socket/TLS errors are OSErrors; ValueError: a header http.client cannot parse.
            cause = f"no answer within {self.timeout:g} s" if watchdog.fired else _describe(e)
            self._mark_down(f"{method} {path}: {cause}")
            return None
        finally:
            watchdog.stop()
            conn.close()
        if 200 <= status < 300 or (status == 404 and method != "PUT"):
            return status, data, length
        if method == "PUT" and status in (400, 413):
            return status, data, length
        self._mark_down(f"{method} {path}: HTTP {status} {printable(reason, 60)}")
        return None


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


def shared_state(state_dir: Path) -> SharedState:
    return SharedState(Path(state_dir), DOWN_MARKER, EVENTS_DIR)


def remote_warnings(state_dir: Path) -> list[str]:
    """The summary lines of this build's remote-cache trouble: down (once), then events, sorted."""
    state = shared_state(state_dir)
    lines = []
    text = state.marker_text()
    if text is not None:
        url, _, reason = text.partition("\t")
        lines.append(
            f"remote cache {printable(url)} was unreachable ({printable(reason)}): "
            "the rest of the build used the local cache only"
        )
    return lines + state.event_lines()


def reset_remote_state(state_dir: Path) -> None:
    """Forget the previous build's marker and events; call at the start of a build."""
    shared_state(state_dir).reset()


def _auth_headers(host: str, *, strict: bool) -> dict[str, str]:
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
            raise _error(f"${ENV_HEADER} must look like 'Name: value' on one line")
        return {}
    token = os.environ.get(ENV_TOKEN, "").strip()
    if token:
        if re.fullmatch(r"[\x21-\x7e]+", token):
            return {"Authorization": f"Bearer {token}"}
        if strict:
            raise _error(f"${ENV_TOKEN} must be printable ASCII without spaces")
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
            raise _error(
                f"{where}: cannot read the netrc file", "check its syntax, and chmod 600 it"
            ) from None
        return {}
    if entry is None:
        return {}
    login, _, password = entry
    basic = base64.b64encode(f"{login}:{password or ''}".encode()).decode("ascii")
    return {"Authorization": f"Basic {basic}"}


def _checked(name: str) -> str:
    """Keys and digests are sha256 hex: checked so nothing else reaches the URL path."""
    if not _HEX64.fullmatch(name):
        raise ValueError(f"not a sha256 hex digest: {name!r}")
    return name


def _describe(e: BaseException) -> str:
    """What went wrong, for a message: an exception's text may quote the server's bytes."""
    if isinstance(e, TimeoutError):
        return "timed out"
    return printable(str(e) or type(e).__name__, 80)


def _error(message: str, hint: str | None = None) -> BuildgenError:
    return BuildgenError(Diagnostic(message, hint=hint))
