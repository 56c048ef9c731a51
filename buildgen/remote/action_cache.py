"""The service's action cache as the build's remote cache, when an executor is configured
and no HTTP cache is (buildgen.cache.exec picks it).

Why: with an executor, every machine of a team already talks to one REAPI service, whose
action cache (AC) and CAS it shares. Through `Execute` that cache only ever answers for the
actions sent there; as the build's remote cache it also holds what runs here (links,
archives, stages the workers do not run, fallbacks), and a compile is found by buildgen's
key before its headers are scanned or its input root is built.

Keys: the AC is keyed by Action digests, buildgen's cache by its own keys
(buildgen.cache.keys), which name what an action reads. Each key maps to the digest of an
Action whose Command is `buildgen-cache-entry <key>` over the empty input root: never run,
uploaded with its entry so that a service that checks an entry's Action finds it.

Trust is the HTTP cache's: an entry must decode to sane outputs (buildgen.cache.protocol)
and every blob is checked against its digest before use; anything wrong is a miss. Writes:
`BUILDGEN_REMOTE_CACHE_READ_ONLY=1` keeps a build from writing, but only the service can
keep untrusted clients out (BuildGrid's `allow-updates`, Buildbarn's AC authorizers, the
read-only API keys of BuildBuddy and EngFlow): give pull-request jobs credentials that may
not UpdateActionResult.

A failed call is a miss (or a skipped write); an unreachable service marks the executor
down for the rest of the build (buildgen.remote.run), so no later action waits on it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from buildgen.cache.model import ActionResult
from buildgen.cache.protocol import (
    ProtocolError,
    decode_action_result,
    encode_action_result,
    validate_action_result,
)
from buildgen.cache.shared_state import printable
from buildgen.remote.client import ExecutorClient, RemoteError
from buildgen.remote.protos import re_pb2
from buildgen.remote.run import executor_down, executor_state
from buildgen.remote.settings import ExecutorSettings
from buildgen.remote.tree import Blob, message_blob

ENTRY_PROGRAM = "buildgen-cache-entry"
T = TypeVar("T")


def entry_action(key: str) -> tuple[Blob, Blob]:
    """The (Action, Command) blobs whose Action digest keys buildgen's `key` in the AC."""
    command = message_blob(re_pb2.Command(arguments=[ENTRY_PROGRAM, key]))
    empty_root = message_blob(re_pb2.Directory())
    action = message_blob(re_pb2.Action(command_digest=command.digest,
                                        input_root_digest=empty_root.digest))
    return action, command


class ReapiActionCache:
    """buildgen.cache.exec's remote cache over the REAPI's AC and CAS (one action's calls)."""

    def __init__(self, settings: ExecutorSettings, state_dir: Path, read_only: bool):
        self.settings = settings
        self.state_dir = state_dir
        self.read_only = read_only
        self._client: ExecutorClient | None = None

    def get_action(self, key: str) -> ActionResult | None:
        action, _ = entry_action(key)
        request = re_pb2.GetActionResultRequest(instance_name=self.settings.instance,
                                                action_digest=action.digest)
        answer = self._call(lambda client: client.get_action_result(request))
        if answer is None:
            return None
        try:
            result = decode_action_result(answer.SerializeToString())
            validate_action_result(result)
        except ProtocolError:
            return None
        return result

    def put_action(self, key: str, result: ActionResult) -> None:
        if self.read_only:
            return
        action, command = entry_action(key)
        entry = re_pb2.ActionResult.FromString(encode_action_result(result))
        request = re_pb2.UpdateActionResultRequest(
            instance_name=self.settings.instance, action_digest=action.digest,
            action_result=entry)

        def store(client: ExecutorClient) -> None:
            client.upload([action, command])
            client.update_action_result(request)

        self._call(store)

    def get_blob(self, digest: str, size: int) -> bytes | None:
        return self._call(lambda client: client.read(re_pb2.Digest(hash=digest,
                                                                   size_bytes=size)))

    def put_blob(self, digest: str, data: bytes) -> None:
        if not self.read_only:
            self._call(lambda client: client.upload([Blob(digest, len(data), data=data)]))

    def upload_action(self, key: str, result: ActionResult, root: Path, *,
                      force: bool = False) -> None:
        """The outputs the CAS lacks (`force`: all of them, over blobs it served damaged),
        then the entry: no reader sees an entry whose blobs are missing."""
        if self.read_only or executor_down(self.state_dir):
            return
        blobs = [Blob(f.digest, f.size, path=str(root / f.path)) for f in result.outputs]
        sent = self._call(lambda client: client.upload(blobs, force=force))
        if sent is not None:
            self.put_action(key, result)

    def _call(self, call: Callable[[ExecutorClient], T]) -> T | None:
        """`call(client)`'s answer, or None: a miss, whatever went wrong."""
        if executor_down(self.state_dir):
            return None
        try:
            if self._client is None:
                self._client = ExecutorClient(self.settings)
            return call(self._client)
        except RemoteError as exc:
            if exc.unreachable:
                executor_state(self.state_dir).mark_down(
                    f"executor {printable(self.settings.url)} was unreachable "
                    f"({printable(str(exc), 300)}): the rest of the build ran locally\n")
            return None
        except OSError:  # an output to upload vanished
            return None

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
