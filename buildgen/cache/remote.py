"""Client of the Bazel HTTP remote-cache protocol: ``/ac/<key>`` and ``/cas/<sha256>``.

Any server of that protocol works (bazel-remote, nginx with WebDAV, hosted caches). The
server is trusted for nothing: every CAS body is checked against its sha256 (nginx does not
verify what it stores), an AC entry must decode to sane outputs, and anything wrong is a miss.

A remote cache is an optimisation, so it never fails a build. The first network error of a
build (refused, timeout, 5xx, auth) writes ``<state_dir>/remote-down``; every later call of the
same build, in any process, sees the marker and skips the remote instead of waiting for its
own timeout. Each action runs in its own process, so the object holds no mutable state: the
marker and one file per event under ``<state_dir>/remote-events/`` (all written atomically)
are what processes share, and ``remote_warnings`` turns them into the build summary's lines.

Credentials are read from the environment or netrc at request time and kept nowhere else.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import netrc
import os
import re
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from buildgen.cache.model import ActionResult
from buildgen.cache.protocol import ProtocolError, decode_action_result, encode_action_result
from buildgen.errors import BuildgenError, Diagnostic
from buildgen.fsutil import write_atomic

ENV_HEADER = "BUILDGEN_REMOTE_CACHE_HEADER"  # a whole header: "Authorization: Bearer xyz"
ENV_TOKEN = "BUILDGEN_REMOTE_CACHE_TOKEN"  # sent as "Authorization: Bearer <token>"
CONNECT_TIMEOUT = 2.0  # s: a cache that is slow to accept is as good as down
READ_TIMEOUT = 30.0  # s between bytes, so a large library still downloads
DOWN_MARKER = "remote-down"
EVENTS_DIR = "remote-events"
# Builds driven by plain `ninja` never call reset_remote_state: an old marker expires instead.
MARKER_TTL = 600.0  # s

_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEADER = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(\S[^\r\n]*)")


@dataclass(frozen=True)
class RemoteCache:
    url: str  # scheme://host[:port][/prefix], never with credentials
    read_only: bool
    state_dir: Path
    connect_timeout: float = CONNECT_TIMEOUT
    read_timeout: float = READ_TIMEOUT

    @classmethod
    def from_settings(cls, url: str, read_only: bool, state_dir: Path) -> RemoteCache:
        """Validate the URL and the credential settings now, so mistakes are errors, not misses."""
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
        return cls(base, read_only, Path(state_dir))

    # -- the protocol ------------------------------------------------------------------------

    def get_action(self, key: str) -> ActionResult | None:
        """The AC entry for ``key``; None for a miss, an unusable entry, an unreachable server."""
        body = self._get(f"/ac/{_checked(key)}")
        if body is None:
            return None
        try:
            result = decode_action_result(body)
            _validate(result)
        except ProtocolError as e:
            self._record("bad-ac", key, f"remote cache entry /ac/{key} is unusable ({e}): ignored")
            return None
        return result

    def put_action(self, key: str, result: ActionResult) -> None:
        """Store the AC entry. Upload its blobs first (``upload_action`` does both in order)."""
        if not self.read_only:
            self._put(f"/ac/{_checked(key)}", encode_action_result(result))

    def get_blob(self, digest: str) -> bytes | None:
        """The blob's bytes if the server has them and they hash to ``digest``, else None."""
        body = self._get(f"/cas/{_checked(digest)}")
        if body is None:
            return None
        actual = hashlib.sha256(body).hexdigest()
        if actual != digest:
            self._record(
                "corrupt", digest,
                f"remote cache blob {digest} failed verification (its bytes hash to {actual}): "
                "discarded, the action ran locally",
            )  # fmt: skip
            return None
        return body

    def put_blob(self, digest: str, data: bytes) -> None:
        if not self.read_only:
            self._put(f"/cas/{_checked(digest)}", data)

    def has_blob(self, digest: str) -> bool:
        response = self._request("HEAD", f"/cas/{_checked(digest)}")
        return response is not None and response[0] == 200

    def upload_action(self, key: str, result: ActionResult, root: Path) -> None:
        """Upload the outputs (files under ``root``) the server lacks, then the AC entry.

        The entry goes last so no reader ever sees an entry whose blobs are missing. A blob
        found corrupted during this build is re-uploaded even though the server has one.
        """
        if self.read_only or self.is_down():
            return
        for f in result.outputs:
            if self._seen("corrupt", f.digest) or not self.has_blob(f.digest):
                self.put_blob(f.digest, (root / f.path).read_bytes())
        self.put_action(key, result)

    # -- shared state ------------------------------------------------------------------------

    def is_down(self) -> bool:
        marker = self.state_dir / DOWN_MARKER
        try:
            return time.time() - marker.stat().st_mtime < MARKER_TTL
        except OSError:  # none, or no state folder at all
            return False

    def warnings(self) -> list[str]:
        return remote_warnings(self.state_dir)

    # The state files are reports: a build dir that cannot take them costs the report only.

    def _mark_down(self, reason: str) -> None:
        if not self.is_down():  # the first failure names the cause; later ones add nothing
            with contextlib.suppress(OSError):
                write_atomic(self.state_dir / DOWN_MARKER, f"{self.url}\t{reason}\n")

    def _record(self, kind: str, subject: str, line: str) -> None:
        with contextlib.suppress(OSError):
            write_atomic(self.state_dir / EVENTS_DIR / f"{kind}-{subject}", line + "\n")

    def _seen(self, kind: str, subject: str) -> bool:
        return (self.state_dir / EVENTS_DIR / f"{kind}-{subject}").exists()

    # -- HTTP ----------------------------------------------------------------------------------

    def _get(self, path: str) -> bytes | None:
        response = self._request("GET", path)
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
        self, method: str, path: str, body: bytes | None = None
    ) -> tuple[int, bytes] | None:
        """(status, body) for 2xx, 404 and the per-entry PUT refusals; None once the server is down.

        Plain http.client rather than urllib: it lets the connect timeout (short) differ from
        the read timeout (long enough for a large blob), and one connection per request is
        all a process running one action needs.
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
        try:
            conn.connect()
            if conn.sock is not None:
                conn.sock.settimeout(self.read_timeout)
            conn.request(method, parts.path + path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            status, reason = response.status, response.reason
        except (OSError, http.client.HTTPException) as e:  # socket/TLS errors are OSErrors
            self._mark_down(f"{method} {path}: {_describe(e)}")
            return None
        finally:
            conn.close()
        if 200 <= status < 300 or (status == 404 and method != "PUT"):
            return status, data
        if method == "PUT" and status in (400, 413):
            return status, data
        self._mark_down(f"{method} {path}: HTTP {status} {reason}")
        return None


def remote_warnings(state_dir: Path) -> list[str]:
    """The summary lines of this build's remote-cache trouble: down (once), then events, sorted."""
    lines = []
    marker = Path(state_dir) / DOWN_MARKER
    with contextlib.suppress(OSError):
        url, _, reason = marker.read_text().strip().partition("\t")
        lines.append(
            f"remote cache {url} was unreachable ({reason}): "
            "the rest of the build used the local cache only"
        )
    events = Path(state_dir) / EVENTS_DIR
    if events.is_dir():
        for event in sorted(p for p in events.iterdir() if not p.name.startswith(".")):
            with contextlib.suppress(OSError):
                lines.append(event.read_text().strip())
    return lines


def reset_remote_state(state_dir: Path) -> None:
    """Forget the previous build's marker and events; call at the start of a build."""
    with contextlib.suppress(FileNotFoundError):
        (Path(state_dir) / DOWN_MARKER).unlink()
    events = Path(state_dir) / EVENTS_DIR
    if events.is_dir():
        for event in events.iterdir():
            with contextlib.suppress(FileNotFoundError):
                event.unlink()


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


def _validate(result: ActionResult) -> None:
    """An AC entry is not content-addressed: refuse outputs that would escape the build dir."""
    for f in result.outputs:
        parts = f.path.split("/")
        if not f.path or f.path.startswith("/") or "\\" in f.path or set(parts) & {"", ".", ".."}:
            raise ProtocolError(f"output path {f.path!r} is not a relative path inside the build")
        if not _HEX64.fullmatch(f.digest) or not 0 <= f.size < 1 << 63:
            raise ProtocolError(f"output {f.path!r} has an invalid digest")


def _describe(e: BaseException) -> str:
    if isinstance(e, TimeoutError):
        return "timed out"
    return str(e) or type(e).__name__


def _error(message: str, hint: str | None = None) -> BuildgenError:
    return BuildgenError(Diagnostic(message, hint=hint))
