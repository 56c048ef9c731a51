"""The test REAPI service itself, through raw gRPC stubs (not buildgen's client): an action
runs on a bot with exactly its environment, large blobs go through ByteStream both ways,
output directories come back as Trees, and failures report their exit code and stderr."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator

import grpc
import pytest
from buildgrid.common.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2 as re_pb2,
)
from buildgrid.common.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2_grpc as re_grpc,
)
from buildgrid.common.protos.google.bytestream import bytestream_pb2, bytestream_pb2_grpc
from buildgrid.common.protos.google.rpc import code_pb2
from google.protobuf.message import Message
from reapi_service import BATCH_LIMIT, ReapiService

ENVIRONMENT = {"PATH": "/usr/bin:/bin", "GREETING": "hi"}
BIG = 3 * 1024 * 1024  # over the service's batch limit (1 MiB), under gRPC's 4 MiB messages


def digest(data: bytes) -> re_pb2.Digest:
    return re_pb2.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


class Client:
    """Just enough of a REAPI client: put blobs and messages, execute, read results."""

    def __init__(self, service: ReapiService) -> None:
        self.instance = service.instance
        self.channel = grpc.insecure_channel(service.address.removeprefix("grpc://"))
        self.cas = re_grpc.ContentAddressableStorageStub(self.channel)
        self.bytestream = bytestream_pb2_grpc.ByteStreamStub(self.channel)
        self.execution = re_grpc.ExecutionStub(self.channel)
        self.capabilities = re_grpc.CapabilitiesStub(self.channel).GetCapabilities(
            re_pb2.GetCapabilitiesRequest(instance_name=self.instance))

    def put(self, data: bytes) -> re_pb2.Digest:
        """Upload by batch, or by ByteStream when over the advertised batch limit."""
        d = digest(data)
        if len(data) > self.capabilities.cache_capabilities.max_batch_total_size_bytes // 2:
            name = f"{self.instance}/uploads/{uuid.uuid4()}/blobs/{d.hash}/{d.size_bytes}"
            chunks = [data[i:i + 65536] for i in range(0, len(data), 65536)]
            self.bytestream.Write(bytestream_pb2.WriteRequest(
                resource_name=name if i == 0 else "", write_offset=i * 65536, data=chunk,
                finish_write=i == len(chunks) - 1) for i, chunk in enumerate(chunks))
        else:
            reply = self.cas.BatchUpdateBlobs(re_pb2.BatchUpdateBlobsRequest(
                instance_name=self.instance,
                requests=[re_pb2.BatchUpdateBlobsRequest.Request(digest=d, data=data)]))
            assert reply.responses[0].status.code == code_pb2.OK, reply
        return d

    def put_message(self, message: Message) -> re_pb2.Digest:
        return self.put(message.SerializeToString(deterministic=True))

    def get(self, d: re_pb2.Digest) -> bytes:
        if d.size_bytes > self.capabilities.cache_capabilities.max_batch_total_size_bytes // 2:
            name = f"{self.instance}/blobs/{d.hash}/{d.size_bytes}"
            data = b"".join(r.data for r in self.bytestream.Read(
                bytestream_pb2.ReadRequest(resource_name=name)))
        else:
            reply = self.cas.BatchReadBlobs(re_pb2.BatchReadBlobsRequest(
                instance_name=self.instance, digests=[d]))
            assert reply.responses[0].status.code == code_pb2.OK, reply
            data = reply.responses[0].data
        assert digest(data) == d
        return data

    def execute(self, argv: list[str], inputs: dict[str, bytes], outputs: list[str],
                env: dict[str, str] = ENVIRONMENT, timeout: int = 0,
                upload: bool = True) -> re_pb2.ExecuteResponse:
        """Run argv on the service with ``inputs`` (name -> bytes, all in the input root;
        not uploaded unless ``upload``)."""
        root = re_pb2.Directory(files=[
            re_pb2.FileNode(name=name, digest=self.put(data) if upload else digest(data),
                            is_executable=name.endswith(".sh"))
            for name, data in sorted(inputs.items())])
        command = re_pb2.Command(
            arguments=argv, output_paths=sorted(outputs),
            environment_variables=[re_pb2.Command.EnvironmentVariable(name=k, value=v)
                                   for k, v in sorted(env.items())])
        action = re_pb2.Action(command_digest=self.put_message(command),
                               input_root_digest=self.put_message(root), do_not_cache=True)
        action.timeout.FromSeconds(timeout)
        action.platform.properties.add(name="OSFamily", value="linux")
        request = re_pb2.ExecuteRequest(instance_name=self.instance,
                                        action_digest=self.put_message(action))
        *_, done = self.execution.Execute(request, timeout=60)
        assert done.done, done
        response = re_pb2.ExecuteResponse()
        assert done.response.Unpack(response), done
        return response


@pytest.fixture(scope="module")
def client(reapi_service: ReapiService) -> Iterator[Client]:
    client = Client(reapi_service)
    yield client
    client.channel.close()


def test_an_action_runs_on_a_bot_with_exactly_its_environment(client, reapi_service) -> None:
    script = "tr a-z A-Z < in.txt > out/up.txt; env | sort > out/env.txt; echo done"
    argv = ["/bin/sh", "-c", script]
    response = client.execute(argv, {"in.txt": b"hello remote\n"}, ["out/up.txt", "out/env.txt"])
    result = response.result
    assert (response.status.code, result.exit_code) == (code_pb2.OK, 0), response
    files = {f.path: client.get(f.digest) for f in result.output_files}
    assert files["out/up.txt"] == b"HELLO REMOTE\n"
    # sh adds PWD (and may add SHLVL, _); nothing else of the bot's environment is there.
    seen = dict(line.split("=", 1) for line in files["out/env.txt"].decode().splitlines())
    assert {k: v for k, v in seen.items() if k not in ("PWD", "SHLVL", "_")} == ENVIRONMENT
    assert client.get(result.stdout_digest) == b"done\n"
    record = reapi_service.executed()[-1]
    assert record["argv"] == argv and record["exit_code"] == 0
    assert record["bot"] == result.execution_metadata.worker
    assert record["bot"] in ("bot-0", "bot-1")
    assert sorted(record["outputs"]) == ["out/env.txt", "out/up.txt"]


def test_large_blobs_and_output_directories(client) -> None:
    assert client.capabilities.cache_capabilities.max_batch_total_size_bytes == BATCH_LIMIT
    big = os.urandom(BIG)
    script = "mkdir -p tree/sub && cp big.bin tree/sub/ && cp run.sh tree/ && cp big.bin out.bin"
    response = client.execute(["/bin/sh", "-c", script],
                              {"big.bin": big, "run.sh": b"#!/bin/sh\n"}, ["out.bin", "tree"])
    result = response.result
    assert result.exit_code == 0, client.get(result.stderr_digest)
    assert [f.path for f in result.output_files] == ["out.bin"]
    assert client.get(result.output_files[0].digest) == big
    (directory,) = result.output_directories
    assert directory.path == "tree"
    tree = re_pb2.Tree.FromString(client.get(directory.tree_digest))
    assert [(f.name, f.is_executable) for f in tree.root.files] == [("run.sh", True)]
    (sub,) = tree.root.directories
    (child,) = tree.children
    assert digest(child.SerializeToString(deterministic=True)) == sub.digest
    assert [f.name for f in child.files] == ["big.bin"]
    assert client.get(child.files[0].digest) == big
    with pytest.raises(grpc.RpcError) as refused:  # the bots had to use ByteStream too
        client.cas.BatchReadBlobs(re_pb2.BatchReadBlobsRequest(
            instance_name=client.instance, digests=[digest(big)]))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_failures_report_exit_code_and_stderr(client, reapi_service) -> None:
    failed = client.execute(["/bin/sh", "-c", "echo oops >&2; exit 3"], {}, [])
    assert failed.result.exit_code == 3
    assert client.get(failed.result.stderr_digest) == b"oops\n"
    missing = client.execute(["no-such-tool", "--version"], {}, [])
    assert missing.result.exit_code == 127
    assert b"no-such-tool" in client.get(missing.result.stderr_digest)
    assert [r["exit_code"] for r in reapi_service.executed()[-2:]] == [3, 127]


def test_a_command_past_its_timeout_is_killed(client) -> None:
    response = client.execute(["/bin/sh", "-c", "echo started; exec sleep 30"], {}, [], timeout=1)
    assert response.status.code == code_pb2.DEADLINE_EXCEEDED
    assert response.result.exit_code == 128 + 9  # SIGKILL
    assert client.get(response.result.stdout_digest) == b"started\n"


def test_a_missing_input_fails_the_precondition(client, reapi_service) -> None:
    before = len(reapi_service.executed())
    response = client.execute(["/bin/cat", "gone.txt"], {"gone.txt": os.urandom(64)}, [],
                              upload=False)
    assert response.status.code == code_pb2.FAILED_PRECONDITION, response
    assert len(reapi_service.executed()) == before  # nothing ran
