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

The transport (one request, its deadline, the credentials it sends) is http_client.py's.

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

import contextlib
import hashlib
import re
import sys
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from buildgen.cache.http_client import (
    ENV_HEADER,
    ENV_TOKEN,
    BodyTooLarge,
    Deadlines,
    NoAnswer,
    auth_headers,
    error,
    send,
)
from buildgen.cache.model import ActionResult
from buildgen.cache.protocol import (
    ProtocolError,
    decode_action_result,
    encode_action_result,
    validate_action_result,
)
from buildgen.cache.shared_state import SharedState, printable

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
            raise error(
                "the remote cache URL must not contain credentials (user:password@): they "
                "would end up in logs and build files",
                f"put them in ~/.netrc ('machine {parts.hostname} login USER password PASS'), "
                f"or set {ENV_TOKEN} or {ENV_HEADER}",
            )
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise error("the remote cache URL must start with http:// or https:// and a host")
        if parts.query or parts.fragment:
            raise error("the remote cache URL must not have a query (?...) or a fragment (#...)")
        try:
            parts.port  # noqa: B018 - a bad port raises here, not at the first request
        except ValueError:
            raise error("the remote cache URL's port is not a number in 1-65535") from None
        auth_headers(parts.hostname, strict=True)
        base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
        if timeout is None:
            return cls(base, read_only, Path(state_dir))
        if not timeout > 0:
            raise error("the remote cache timeout must be a positive number of seconds")
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
        The transport, deadlines included, is http_client.send's."""
        if self.is_down():
            return None
        deadlines = Deadlines(self.connect_timeout, self.read_timeout, self.timeout)
        try:
            reply = send(self.url, method, path, body, limit, deadlines)
        except BodyTooLarge as e:
            what = f"{e.length} bytes" if e.length is not None else "a longer body"
            self._record(
                "too-large", path.rsplit("/", 1)[-1],
                f"remote cache answered {method} {path} with {what}, more than the "
                f"{limit} expected: not read, a miss",
            )  # fmt: skip
            return None
        except NoAnswer as e:
            self._mark_down(f"{method} {path}: {e}")
            return None
        status = reply.status
        if 200 <= status < 300 or (status == 404 and method != "PUT"):
            return status, reply.body, reply.length
        if method == "PUT" and status in (400, 413):
            return status, reply.body, reply.length
        self._mark_down(f"{method} {path}: HTTP {status} {printable(reply.reason, 60)}")
        return None


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


def _checked(name: str) -> str:
    """Keys and digests are sha256 hex: checked so nothing else reaches the URL path."""
    if not _HEX64.fullmatch(name):
        raise ValueError(f"not a sha256 hex digest: {name!r}")
    return name
