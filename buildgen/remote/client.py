"""The gRPC calls of remote execution: CAS uploads and downloads, Execute, capabilities.

Only blobs the CAS lacks are sent (`FindMissingBlobs`): small ones together in
`BatchUpdateBlobs` requests under the server's batch limit, larger ones through ByteStream
`Write` in chunks. Downloads mirror that (`BatchReadBlobs`, ByteStream `Read`) and check
every blob against its digest: the server is trusted for nothing it cannot prove.

Every call has a deadline. A call that fails raises `RemoteError`, which carries the status
code and says whether trying again may help (the service is briefly unavailable, a blob
failed its check) or not (the request was refused, the action timed out on the worker), and
whether the service itself could not be reached; the caller decides between a retry and
running locally.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from buildgen.remote.protos import (
    bs_grpc,
    bs_pb2,
    code_pb2,
    grpc,
    operations_pb2,
    re_grpc,
    re_pb2,
    status_pb2,
)
from buildgen.remote.settings import ExecutorSettings
from buildgen.remote.tree import Blob

CALL_TIMEOUT = 60.0  # s for one CAS call
DEFAULT_BATCH_LIMIT = 4 << 20  # gRPC's default message limit, when the server names none
BATCH_OVERHEAD = 4 << 10  # room for a batch request's digests and framing
CHUNK = 1 << 20  # ByteStream chunk
# Codes after which the same request may well succeed (the API's own advice for retries).
TRANSIENT = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED",
                       "INTERNAL", "UNKNOWN", "CANCELLED"})
# Codes of a failed call that mean the service did not answer at all.
UNREACHABLE = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED"})


class RemoteError(Exception):
    """`code`: the gRPC or status code's name ("UNAVAILABLE"), or "" for a failure of ours
    (a blob that does not match its digest, an output the worker did not return).
    `transient`: the same request may succeed if sent again. `unreachable`: a call to the
    service got no answer, so the next action's calls would fare no better."""

    def __init__(self, message: str, *, transient: bool, code: str = "",
                 unreachable: bool = False, corrupt: bool = False):
        super().__init__(message)
        self.code = code
        self.transient = transient
        self.unreachable = unreachable
        self.corrupt = corrupt  # a blob from the service failed its digest check


@dataclass(frozen=True)
class Execution:
    response: re_pb2.ExecuteResponse  # status OK: `result` is the action's result

    @property
    def result(self) -> re_pb2.ActionResult:
        return self.response.result


class ExecutorClient:
    """One channel to the service, for the calls of one action."""

    def __init__(self, settings: ExecutorSettings):
        self.settings = settings
        self.instance = settings.instance
        self.channel = _channel(settings)
        metadata = []
        if settings.token:
            metadata.append(("authorization", f"Bearer {settings.token}"))
        if settings.header:
            metadata.append(settings.header)
        self.metadata = tuple(metadata)
        self.cas = re_grpc.ContentAddressableStorageStub(self.channel)
        self.bytestream = bs_grpc.ByteStreamStub(self.channel)
        self.execution = re_grpc.ExecutionStub(self.channel)
        self.capabilities = re_grpc.CapabilitiesStub(self.channel)
        self.action_cache = re_grpc.ActionCacheStub(self.channel)
        self._stub_of = {"BatchReadBlobs": self.cas, "FindMissingBlobs": self.cas,
                         "BatchUpdateBlobs": self.cas, "GetCapabilities": self.capabilities,
                         "Write": self.bytestream, "GetActionResult": self.action_cache,
                         "UpdateActionResult": self.action_cache}
        self._batch_limit: int | None = None

    def close(self) -> None:
        self.channel.close()

    # -- CAS -------------------------------------------------------------------------------

    def upload(self, blobs: Sequence[Blob], *, force: bool = False) -> int:
        """Send the blobs the CAS lacks (`force`: all, over what it holds); returns how many
        were sent."""
        unique = list({b.hash: b for b in blobs}.values())
        missing = unique if force else self._missing(unique)
        limit = self.batch_limit() - BATCH_OVERHEAD
        batch: list[Blob] = []
        total = 0
        for blob in missing:
            if blob.size > limit:
                self._write(blob)
                continue
            if total + blob.size > limit:
                self._update(batch)
                batch, total = [], 0
            batch.append(blob)
            total += blob.size
        if batch:
            self._update(batch)
        return len(missing)

    def read(self, digest: re_pb2.Digest) -> bytes:
        """A blob's bytes, checked against its digest."""
        if digest.size_bytes == 0:
            return b""
        if digest.size_bytes <= self.batch_limit() - BATCH_OVERHEAD:
            request = re_pb2.BatchReadBlobsRequest(instance_name=self.instance, digests=[digest])
            response = self._call("BatchReadBlobs", request)
            answer = response.responses[0] if response.responses else None
            if answer is None or answer.status.code != code_pb2.OK:
                reason = answer.status.message if answer is not None else "no answer"
                raise RemoteError(f"reading blob {digest.hash[:12]}: {reason}", transient=True)
            data = answer.data
        else:
            name = _resource(self.instance, f"blobs/{digest.hash}/{digest.size_bytes}")
            try:
                data = b"".join(chunk.data for chunk in self.bytestream.Read(
                    bs_pb2.ReadRequest(resource_name=name), timeout=CALL_TIMEOUT,
                    metadata=self.metadata))
            except grpc.RpcError as exc:
                raise _remote_error("ByteStream.Read", exc) from None
        if len(data) != digest.size_bytes or hashlib.sha256(data).hexdigest() != digest.hash:
            raise RemoteError(f"blob {digest.hash[:12]} does not match its digest",
                              transient=True, corrupt=True)
        return data

    def batch_limit(self) -> int:
        if self._batch_limit is None:
            request = re_pb2.GetCapabilitiesRequest(instance_name=self.instance)
            answer = self._call("GetCapabilities", request)
            named = answer.cache_capabilities.max_batch_total_size_bytes
            self._batch_limit = min(named, DEFAULT_BATCH_LIMIT) if named else DEFAULT_BATCH_LIMIT
        return self._batch_limit

    def _missing(self, blobs: Sequence[Blob]) -> list[Blob]:
        request = re_pb2.FindMissingBlobsRequest(
            instance_name=self.instance, blob_digests=[b.digest for b in blobs])
        answer = self._call("FindMissingBlobs", request)
        lacking = {d.hash for d in answer.missing_blob_digests}
        return [b for b in blobs if b.hash in lacking]

    def _update(self, batch: Sequence[Blob]) -> None:
        request = re_pb2.BatchUpdateBlobsRequest(instance_name=self.instance, requests=[
            re_pb2.BatchUpdateBlobsRequest.Request(digest=b.digest, data=b.read())
            for b in batch
        ])
        for answer in self._call("BatchUpdateBlobs", request).responses:
            if answer.status.code != code_pb2.OK:
                raise RemoteError(f"uploading blob {answer.digest.hash[:12]}: "
                                  f"{answer.status.message}", transient=True)

    def _write(self, blob: Blob) -> None:
        name = _resource(self.instance,
                         f"uploads/{uuid.uuid4()}/blobs/{blob.hash}/{blob.size}")
        data = blob.read()

        def chunks() -> Iterator[bs_pb2.WriteRequest]:
            for offset in range(0, max(len(data), 1), CHUNK):
                piece = data[offset:offset + CHUNK]
                yield bs_pb2.WriteRequest(
                    resource_name=name if offset == 0 else "", write_offset=offset,
                    data=piece, finish_write=offset + len(piece) >= len(data))

        answer = self._call("Write", chunks())
        if answer.committed_size != blob.size:
            raise RemoteError(f"ByteStream.Write of {blob.hash[:12]} committed "
                              f"{answer.committed_size} of {blob.size} bytes", transient=True)

    # -- action cache ----------------------------------------------------------------------

    def get_action_result(self, request: re_pb2.GetActionResultRequest
                          ) -> re_pb2.ActionResult | None:
        """The entry, or None when the cache has none."""
        try:
            return self._call("GetActionResult", request)
        except RemoteError as exc:
            if exc.code == "NOT_FOUND":
                return None
            raise

    def update_action_result(self, request: re_pb2.UpdateActionResultRequest) -> None:
        self._call("UpdateActionResult", request)

    # -- execution -------------------------------------------------------------------------

    def execute(self, action: Blob, timeout: float, *, skip_cache: bool = False) -> Execution:
        """Run the action whose blob (and everything it names) is in the CAS; waits for it,
        following the operation after a broken stream. `timeout`: the whole wait.
        `skip_cache`: run it even if the service's action cache has a result (one whose
        outputs failed their check)."""
        request = re_pb2.ExecuteRequest(instance_name=self.instance, action_digest=action.digest,
                                        skip_cache_lookup=skip_cache)
        try:
            operation = _last(self.execution.Execute(request, timeout=timeout,
                                                     metadata=self.metadata))
            if operation is not None and not operation.done and operation.name:
                operation = _last(self.execution.WaitExecution(
                    re_pb2.WaitExecutionRequest(name=operation.name), timeout=timeout,
                    metadata=self.metadata))
        except grpc.RpcError as exc:
            error = _remote_error("Execute", exc)
            if error.code == "DEADLINE_EXCEEDED":  # our wait, past the action's own timeout
                raise RemoteError(f"no result within {timeout:.0f} s", transient=False,
                                  code=error.code) from None
            raise error from None
        if operation is None or not operation.done:
            raise RemoteError("the execution stream ended before the action did", transient=True)
        if operation.HasField("error"):
            raise _status_error(operation.error)
        response = re_pb2.ExecuteResponse()
        operation.response.Unpack(response)
        if response.status.code != code_pb2.OK:
            raise _status_error(response.status)
        return Execution(response)

    def _call(self, name: str, request):
        method = getattr(self._stub_of[name], name)
        try:
            return method(request, timeout=CALL_TIMEOUT, metadata=self.metadata)
        except grpc.RpcError as exc:
            raise _remote_error(name, exc) from None


def _channel(settings: ExecutorSettings) -> grpc.Channel:
    options = [("grpc.max_receive_message_length", 64 << 20),
               ("grpc.max_send_message_length", 64 << 20)]
    if not settings.tls:
        return grpc.insecure_channel(settings.target, options=options)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read(settings.tls_ca), private_key=_read(settings.tls_key),
        certificate_chain=_read(settings.tls_cert))
    return grpc.secure_channel(settings.target, credentials, options=options)


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(os.path.expanduser(path), "rb") as f:
        return f.read()


def _resource(instance: str, rest: str) -> str:
    return f"{instance}/{rest}" if instance else rest


def _last(stream: Iterator[operations_pb2.Operation]) -> operations_pb2.Operation | None:
    """The last operation of a stream (the one that is done, when the action finished)."""
    last = None
    for operation in stream:
        last = operation
        if operation.done:
            break
    return last


def _remote_error(call: str, exc: grpc.RpcError) -> RemoteError:
    """A failed call: the service's answer, or that none came (unreachable)."""
    code = exc.code() if hasattr(exc, "code") else None
    name = code.name if code is not None else "UNKNOWN"
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return RemoteError(f"{call}: {name}: {details}", transient=name in TRANSIENT, code=name,
                       unreachable=name in UNREACHABLE)


def _status_error(status: status_pb2.Status) -> RemoteError:
    """An execution the service answered with a non-OK status. DEADLINE_EXCEEDED there is
    the action's own timeout on the worker: sending it again would time out again."""
    name = code_pb2.Code.Name(status.code) if status.code in code_pb2.Code.values() else ""
    if name == "DEADLINE_EXCEEDED":
        return RemoteError(f"the action timed out on the worker ({_status_text(status)})",
                           transient=False, code=name)
    return RemoteError(f"the action failed to run: {_status_text(status)}",
                       transient=name in TRANSIENT or not name, code=name)


def _status_text(status: object) -> str:
    code = getattr(status, "code", 2)
    name = code_pb2.Code.Name(code) if code in code_pb2.Code.values() else str(code)
    message = getattr(status, "message", "")
    return f"{name}: {message}" if message else name
