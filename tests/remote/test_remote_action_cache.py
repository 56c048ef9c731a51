"""The executor's action cache as the build's remote cache (buildgen.remote.action_cache),
against the tests' BuildGrid: entries and blobs round-trip under buildgen's keys, a
read-only build writes nothing, an entry that would write outside the build is a miss, and
an unreachable service is a miss that marks the executor down for the build."""

from __future__ import annotations

import hashlib
import socket

from buildgen.cache.model import ActionResult, OutputFile
from buildgen.remote.action_cache import ReapiActionCache, entry_action
from buildgen.remote.client import ExecutorClient
from buildgen.remote.protos import re_pb2
from buildgen.remote.run import executor_down
from buildgen.remote.settings import resolve_executor


def _settings(address: str, instance: str = ""):
    settings = resolve_executor({"executor": address, "instance": instance}, {})
    assert settings is not None
    return settings


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _outputs(root, files: dict[str, bytes]) -> ActionResult:
    outputs = []
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
        outputs.append(OutputFile(path, hashlib.sha256(data).hexdigest(), len(data)))
    return ActionResult(tuple(outputs))


def test_an_entry_and_its_blobs_round_trip(reapi_service, tmp_path) -> None:
    settings = _settings(reapi_service.address, reapi_service.instance)
    key = _key("round trip")
    result = _outputs(tmp_path / "build", {"m/lib.so": b"\x7fELF library", "m/a.o": b"obj"})
    writer = ReapiActionCache(settings, tmp_path / "state", read_only=False)
    assert writer.get_action(key) is None
    writer.upload_action(key, result, tmp_path / "build")
    reader = ReapiActionCache(settings, tmp_path / "other-state", read_only=False)
    assert reader.get_action(key) == result
    assert reader.get_blob(result.outputs[0].digest, result.outputs[0].size) == b"\x7fELF library"
    assert reader.get_action(_key("another action")) is None


def test_a_read_only_build_writes_nothing(reapi_service, tmp_path) -> None:
    settings = _settings(reapi_service.address, reapi_service.instance)
    key = _key("read only")
    result = _outputs(tmp_path, {"out.o": b"read-only bytes"})
    ReapiActionCache(settings, tmp_path / "state", read_only=True).upload_action(
        key, result, tmp_path)
    assert ReapiActionCache(settings, tmp_path / "state", read_only=False).get_action(key) is None


def test_an_entry_that_escapes_the_build_dir_is_a_miss(reapi_service, tmp_path) -> None:
    settings = _settings(reapi_service.address, reapi_service.instance)
    key = _key("escape")
    action, command = entry_action(key)
    bad = re_pb2.ActionResult(output_files=[re_pb2.OutputFile(
        path="../../etc/evil", digest=re_pb2.Digest(hash=_key("x"), size_bytes=1))])
    client = ExecutorClient(settings)
    try:
        client.upload([action, command])
        client.update_action_result(re_pb2.UpdateActionResultRequest(
            instance_name=settings.instance, action_digest=action.digest, action_result=bad))
    finally:
        client.close()
    assert ReapiActionCache(settings, tmp_path / "state", read_only=False).get_action(key) is None


def test_an_unreachable_service_is_a_miss_and_marks_the_executor_down(tmp_path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cache = ReapiActionCache(_settings(f"grpc://127.0.0.1:{port}"), tmp_path, read_only=False)
    assert cache.get_action(_key("k")) is None
    assert executor_down(tmp_path)
    assert cache.get_blob(_key("b"), 3) is None  # not even tried: the marker says down
