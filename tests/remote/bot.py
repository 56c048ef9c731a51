"""A minimal REAPI worker ("bot") for the tests' BuildGrid: the Remote Workers API's Bots service.

    python tests/remote/bot.py --server grpc://127.0.0.1:PORT --instance main \
        --work-dir DIR --log FILE [--bot-id ID] [--properties OSFamily=linux ISA=x86-64 ...]

No REAPI worker installs from PyPI, so this one runs under the test Python with grpcio and
buildgrid-common's generated protos. It takes one lease at a time: the lease's payload is
the Action (or its Digest); the bot fetches the Command and input root from CAS into a
fresh folder, runs the arguments there with exactly the Command's environment, uploads the
outputs, stdout and stderr, appends a JSON line to --log (so tests see what ran remotely)
and completes the lease with the ActionResult. The scheduler matches an action's platform
properties to a bot's --properties (device properties): the action's must be a subset.

Faults, for the tests of buildgen's handling of them (--faults DIR): each file DIR/*.json is
one fault, {"match": TEXT, "mode": MODE, ...}, taken (renamed away, so only one bot gets it)
by the first lease whose command line contains TEXT:
- status: complete the lease with status `code` (a google.rpc.Code name) without running it;
- slow: run the command after `seconds` of sleep, inside the action's timeout;
- corrupt: run it, then overwrite its first output's blob in the server's disk storage
  (--cas-dir) with other bytes of the same size, as a failing disk would;
- die: restart the bot process at once (exec), leaving the lease unfinished, as a worker
  that crashes and is restarted does: the server gives the lease to a bot again.
The record of a faulty lease says {"fault": MODE}.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import grpc
from buildgrid.common.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2 as re_pb2,
)
from buildgrid.common.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2_grpc as re_grpc,
)
from buildgrid.common.protos.google.bytestream import bytestream_pb2, bytestream_pb2_grpc
from buildgrid.common.protos.google.devtools.remoteworkers.v1test2 import (
    bots_pb2,
    bots_pb2_grpc,
    worker_pb2,
)
from buildgrid.common.protos.google.rpc import code_pb2
from google.protobuf.message import Message

CHUNK = 256 * 1024  # ByteStream chunk size
LONG_POLL = 10  # seconds an UpdateBotSession may wait for work (BuildGrid waits 80% of it)
# BuildGrid skips the wait for work when under 3.75 s are left: registering returns at once.
REGISTER_TIMEOUT = 3
READY = "bot session:"  # logged on stderr once registered; the fixture waits for it


class MissingBlob(Exception):
    """An input the client did not upload: the lease fails with FAILED_PRECONDITION, as
    REAPI asks, so the client can upload it and retry."""


def digest_of(data: bytes) -> re_pb2.Digest:
    return re_pb2.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


def encode(message: Message) -> bytes:
    return message.SerializeToString(deterministic=True)


class Cas:
    """CAS reads and writes: batches for small blobs, ByteStream for those over the limit."""

    def __init__(self, channel: grpc.Channel, instance: str) -> None:
        self.instance = instance
        self.cas = re_grpc.ContentAddressableStorageStub(channel)
        self.bytestream = bytestream_pb2_grpc.ByteStreamStub(channel)
        capabilities = re_grpc.CapabilitiesStub(channel).GetCapabilities(
            re_pb2.GetCapabilitiesRequest(instance_name=instance))
        limit = capabilities.cache_capabilities.max_batch_total_size_bytes or 4 * 1024 * 1024
        self.batch_limit = limit - 16 * 1024  # room for the request's own fields

    def _batches(self, digests: Iterable[re_pb2.Digest]) -> Iterator[list[re_pb2.Digest]]:
        """Groups of small digests whose sizes add up to at most the batch limit."""
        batch: list[re_pb2.Digest] = []
        total = 0
        for digest in digests:
            if batch and total + digest.size_bytes > self.batch_limit:
                yield batch
                batch, total = [], 0
            batch.append(digest)
            total += digest.size_bytes
        if batch:
            yield batch

    def read(self, digests: Iterable[re_pb2.Digest]) -> dict[str, bytes]:
        """The blobs by hash."""
        unique = {d.hash: d for d in digests}.values()
        small = [d for d in unique if d.size_bytes <= self.batch_limit]
        blobs = {d.hash: self._stream_read(d) for d in unique if d.size_bytes > self.batch_limit}
        for batch in self._batches(small):
            reply = self.cas.BatchReadBlobs(re_pb2.BatchReadBlobsRequest(
                instance_name=self.instance, digests=batch))
            for response in reply.responses:
                if response.status.code == code_pb2.NOT_FOUND:
                    raise MissingBlob(f"blobs/{response.digest.hash}/{response.digest.size_bytes}")
                if response.status.code != code_pb2.OK:
                    raise RuntimeError(f"cannot read {response.digest.hash}: {response.status}")
                blobs[response.digest.hash] = response.data
        return blobs

    def read_message(self, digest: re_pb2.Digest, message: Message) -> Message:
        message.ParseFromString(self.read([digest])[digest.hash])
        return message

    def _stream_read(self, digest: re_pb2.Digest) -> bytes:
        name = f"{self.instance}/blobs/{digest.hash}/{digest.size_bytes}"
        request = bytestream_pb2.ReadRequest(resource_name=name)
        try:
            return b"".join(chunk.data for chunk in self.bytestream.Read(request))
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                raise MissingBlob(name.removeprefix(f"{self.instance}/")) from None
            raise

    def write(self, blobs: dict[str, bytes]) -> None:
        """Upload blobs given by hash (as `blobs_of` returns them)."""
        digests = [digest_of(data) for data in blobs.values()]
        for digest in digests:
            if digest.size_bytes > self.batch_limit:
                self._stream_write(digest, blobs[digest.hash])
        for batch in self._batches(d for d in digests if d.size_bytes <= self.batch_limit):
            requests = [re_pb2.BatchUpdateBlobsRequest.Request(digest=d, data=blobs[d.hash])
                        for d in batch]
            reply = self.cas.BatchUpdateBlobs(re_pb2.BatchUpdateBlobsRequest(
                instance_name=self.instance, requests=requests))
            for response in reply.responses:
                if response.status.code != code_pb2.OK:
                    raise RuntimeError(f"cannot write {response.digest.hash}: {response.status}")

    def _stream_write(self, digest: re_pb2.Digest, data: bytes) -> None:
        name = f"{self.instance}/uploads/{uuid.uuid4()}/blobs/{digest.hash}/{digest.size_bytes}"

        def requests() -> Iterator[bytestream_pb2.WriteRequest]:
            for offset in range(0, len(data), CHUNK):
                yield bytestream_pb2.WriteRequest(
                    resource_name=name if offset == 0 else "", write_offset=offset,
                    data=data[offset:offset + CHUNK], finish_write=offset + CHUNK >= len(data))

        self.bytestream.Write(requests())


# --- Inputs --------------------------------------------------------------------------------


def fetch_directories(cas: Cas, root: re_pb2.Digest) -> dict[str, re_pb2.Directory]:
    """Every Directory of the input tree by hash, one batch per level."""
    directories: dict[str, re_pb2.Directory] = {}
    level = [root]
    while level:
        for hash_, data in cas.read(level).items():
            directories[hash_] = re_pb2.Directory.FromString(data)
        level = [child.digest for d in level for child in directories[d.hash].directories
                 if child.digest.hash not in directories]
    return directories


def materialise(cas: Cas, root_digest: re_pb2.Digest, root: Path) -> None:
    """Write the input tree under ``root``: files (with their executable bit), dirs, symlinks."""
    directories = fetch_directories(cas, root_digest)
    files = [f.digest for d in directories.values() for f in d.files]
    contents = cas.read(files)

    def write(directory: re_pb2.Directory, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        for file in directory.files:
            (path / file.name).write_bytes(contents[file.digest.hash])
            (path / file.name).chmod(0o755 if file.is_executable else 0o644)
        for link in directory.symlinks:
            (path / link.name).symlink_to(link.target)
        for child in directory.directories:
            write(directories[child.digest.hash], path / child.name)

    write(directories[root_digest.hash], root)


# --- Running -------------------------------------------------------------------------------


def run(command: re_pb2.Command, argv: list[str], cwd: Path, timeout: float | None,
        stdout: Path, stderr: Path) -> tuple[int, bool]:
    """Run argv (the command's arguments) with the command's environment; returns (exit
    code, timed out). Nothing of the bot's environment leaks in. A command that cannot start
    gets 127 and the reason on its stderr."""
    environment = {v.name: v.value for v in command.environment_variables}
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        try:
            process = subprocess.Popen(argv, cwd=cwd, env=environment,
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                       start_new_session=True)
        except OSError as error:
            err.write(f"bot: cannot run {argv}: {error}\n".encode())
            return 127, False
        try:
            code = process.wait(timeout=timeout)
            return (128 - code if code < 0 else code), False
        except subprocess.TimeoutExpired:
            return 128 + signal.SIGKILL, True
        finally:  # also on timeout and when the bot is stopped: kill what the command left
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# --- Outputs -------------------------------------------------------------------------------


def directory_message(path: Path, blobs: dict[str, bytes],
                      children: dict[str, re_pb2.Directory]) -> re_pb2.Directory:
    """The Directory for ``path``; file contents go into ``blobs``, subdirectories into
    ``children`` (by hash), as a Tree message lists them."""
    directory = re_pb2.Directory()
    for entry in sorted(path.iterdir(), key=lambda p: p.name):
        if entry.is_symlink():
            directory.symlinks.add(name=entry.name, target=os.readlink(entry))
        elif entry.is_dir():
            child = directory_message(entry, blobs, children)
            data = encode(child)
            children[digest_of(data).hash] = child
            directory.directories.add(name=entry.name, digest=digest_of(data))
        else:
            data = entry.read_bytes()
            blobs[digest_of(data).hash] = data
            directory.files.add(name=entry.name, digest=digest_of(data),
                                is_executable=os.access(entry, os.X_OK))
    return directory


def collect_outputs(command: re_pb2.Command, cwd: Path, result: re_pb2.ActionResult,
                    blobs: dict[str, bytes]) -> list[str]:
    """Fill ``result``'s outputs from output_paths (or the older output_files and
    output_directories: what is on disk decides the kind); returns the paths found."""
    found = []
    for name in command.output_paths or [*command.output_files, *command.output_directories]:
        path = cwd / name
        if path.is_symlink():
            result.output_symlinks.add(path=name, target=os.readlink(path))
        elif path.is_dir():
            children: dict[str, re_pb2.Directory] = {}
            tree = re_pb2.Tree(root=directory_message(path, blobs, children),
                               children=children.values())
            data = encode(tree)
            blobs[digest_of(data).hash] = data
            result.output_directories.add(path=name, tree_digest=digest_of(data))
        elif path.is_file():
            data = path.read_bytes()
            blobs[digest_of(data).hash] = data
            result.output_files.add(path=name, digest=digest_of(data),
                                    is_executable=os.access(path, os.X_OK))
        else:
            continue
        found.append(name)
    return found


# --- Faults --------------------------------------------------------------------------------


class FaultStatus(Exception):
    """A `status` fault: the lease completes with this code instead of a result."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def take_fault(faults: Path | None, argv: list[str], bot_id: str) -> dict[str, object] | None:
    """The first fault whose `match` is in the command line, taken so no other lease gets it."""
    if faults is None:
        return None
    line = " ".join(argv)
    for path in sorted(faults.glob("*.json")):
        try:
            fault = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if str(fault["match"]) not in line:
            continue
        try:
            os.rename(path, path.with_name(f"{path.name}.taken-{bot_id}"))
        except FileNotFoundError:  # another bot took it first
            continue
        return fault
    return None


def corrupt_blob(cas_dir: Path, digest: re_pb2.Digest) -> None:
    """Flip every byte of a stored blob: BuildGrid's disk storage keeps objects at
    <path>/cas/objects/<first two hex digits>/<the rest>, and never rewrites one."""
    stored = cas_dir / "cas" / "objects" / digest.hash[:2] / digest.hash[2:]
    stored.write_bytes(bytes(b ^ 0xFF for b in stored.read_bytes()))


# --- Leases --------------------------------------------------------------------------------


class Bot:
    def __init__(self, channel: grpc.Channel, args: argparse.Namespace) -> None:
        self.args = args
        self.cas = Cas(channel, args.instance)
        self.bots = bots_pb2_grpc.BotsStub(channel)

    def new_session(self) -> bots_pb2.BotSession:
        """Register; the device's properties are what actions' platforms are matched to."""
        properties = [worker_pb2.Device.Property(key=k, value=v)
                      for k, v in (item.split("=", 1) for item in self.args.properties)]
        session = bots_pb2.BotSession(
            bot_id=self.args.bot_id, status=bots_pb2.BotStatus.OK,
            worker=worker_pb2.Worker(devices=[worker_pb2.Device(handle=self.args.bot_id,
                                                                properties=properties)]))
        session = self.bots.CreateBotSession(
            bots_pb2.CreateBotSessionRequest(parent=self.args.instance, bot_session=session),
            timeout=REGISTER_TIMEOUT)
        print(f"{READY} {session.name}", file=sys.stderr, flush=True)
        return session

    def serve(self) -> None:
        """Long-poll for leases and run each; a lost session (server restart) is recreated."""
        session = None
        while True:
            try:
                session = session or self.new_session()
                for lease in session.leases:
                    if lease.state == bots_pb2.LeaseState.ACTIVE:
                        self.complete(lease)
                session = self.bots.UpdateBotSession(
                    bots_pb2.UpdateBotSessionRequest(name=session.name, bot_session=session),
                    timeout=LONG_POLL)
            except grpc.RpcError as error:
                print(f"bot {self.args.bot_id}: {error.code()}: {error.details()}",
                      file=sys.stderr, flush=True)
                session = None
                time.sleep(0.5)

    def complete(self, lease: bots_pb2.Lease) -> None:
        """Run the lease's action and record the outcome in the lease, for the next update.

        A failure of the bot's own (not the command's) still completes the lease, with an
        error status, rather than leaving the client waiting until the session expires;
        BuildGrid retries INTERNAL up to 5 times.
        """
        lease.state = bots_pb2.LeaseState.COMPLETED
        try:
            result, timed_out = self.execute(self.action(lease))
            lease.status.code = code_pb2.DEADLINE_EXCEEDED if timed_out else code_pb2.OK
            lease.result.Pack(result)
        except MissingBlob as error:
            lease.status.code = code_pb2.FAILED_PRECONDITION
            lease.status.message = f"missing input: {error}"
        except FaultStatus as fault:
            lease.status.code = fault.code
            lease.status.message = str(fault)
        except Exception as error:  # anything else: reported to the client, and logged
            lease.status.code = code_pb2.INTERNAL
            lease.status.message = f"bot {self.args.bot_id}: {error!r}"
            print(lease.status.message, file=sys.stderr, flush=True)

    def action(self, lease: bots_pb2.Lease) -> re_pb2.Action:
        """The lease's Action: BuildGrid sends the Action itself or its Digest."""
        action = re_pb2.Action()
        if not lease.payload.Unpack(action):
            digest = re_pb2.Digest()
            lease.payload.Unpack(digest)
            self.cas.read_message(digest, action)
        return action

    def execute(self, action: re_pb2.Action) -> tuple[re_pb2.ActionResult, bool]:
        command = self.cas.read_message(action.command_digest, re_pb2.Command())
        argv = list(command.arguments)
        fault = take_fault(self.args.faults, argv, self.args.bot_id)
        mode = str(fault["mode"]) if fault else ""
        if fault and mode in ("status", "die"):
            self.record(action, command, -1, [], mode)
            if mode == "die":
                sys.stderr.flush()
                os.execv(sys.executable, [sys.executable, *sys.argv])
            code = code_pb2.Code.Value(str(fault["code"]))
            raise FaultStatus(code, f"bot {self.args.bot_id}: injected {fault['code']}")
        if mode == "slow":
            argv = ["sh", "-c", f"sleep {fault['seconds']}; exec \"$@\"", "sh", *argv]
        with tempfile.TemporaryDirectory(dir=self.args.work_dir) as folder:
            root = Path(folder, "root")
            materialise(self.cas, action.input_root_digest, root)
            cwd = root / command.working_directory
            cwd.mkdir(parents=True, exist_ok=True)
            for name in [*command.output_paths, *command.output_files,
                         *command.output_directories]:
                (cwd / name).parent.mkdir(parents=True, exist_ok=True)
            result = re_pb2.ActionResult()
            result.execution_metadata.worker = self.args.bot_id
            result.execution_metadata.execution_start_timestamp.GetCurrentTime()
            timeout = action.timeout.ToTimedelta().total_seconds() or None
            stdout, stderr = Path(folder, "stdout"), Path(folder, "stderr")
            started = time.monotonic()
            result.exit_code, timed_out = run(command, argv, cwd, timeout, stdout, stderr)
            seconds = time.monotonic() - started
            result.execution_metadata.execution_completed_timestamp.GetCurrentTime()
            streams = stdout.read_bytes(), stderr.read_bytes()
            blobs = {digest_of(data).hash: data for data in streams}
            result.stdout_digest.CopyFrom(digest_of(streams[0]))
            result.stderr_digest.CopyFrom(digest_of(streams[1]))
            outputs = collect_outputs(command, cwd, result, blobs)
            self.cas.write(blobs)
            if mode == "corrupt" and result.output_files:
                corrupt_blob(self.args.cas_dir, result.output_files[0].digest)
        self.record(action, command, result.exit_code, outputs, mode, seconds)
        return result, timed_out

    def record(self, action: re_pb2.Action, command: re_pb2.Command, exit_code: int,
               outputs: list[str], fault: str = "", seconds: float = 0.0) -> None:
        """One JSON line per lease, appended in one write so bots can share the file;
        `seconds`: how long the command ran."""
        entry = {"bot": self.args.bot_id, "action": digest_of(encode(action)).hash,
                 "argv": list(command.arguments), "exit_code": exit_code, "outputs": outputs,
                 "seconds": round(seconds, 4),
                 "platform": {p.name: p.value for p in action.platform.properties},
                 "env": {v.name: v.value for v in command.environment_variables
                         if v.name.startswith("PYTHON")}}
        line = json.dumps({**entry, **({"fault": fault} if fault else {})}) + "\n"
        fd = os.open(self.args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True, help="grpc://HOST:PORT")
    parser.add_argument("--instance", default="")
    parser.add_argument("--work-dir", required=True, type=Path)
    parser.add_argument("--log", required=True, type=Path, help="JSON lines, one per lease")
    parser.add_argument("--bot-id", default=f"bot-{os.getpid()}")
    parser.add_argument("--properties", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--faults", type=Path, help="a folder of faults to inject (above)")
    parser.add_argument("--cas-dir", type=Path, help="the server's disk storage, for corrupt")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    # SIGTERM unwinds like an exception: a running command's group is killed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with grpc.insecure_channel(args.server.removeprefix("grpc://")) as channel:
        Bot(channel, args).serve()


if __name__ == "__main__":
    main()
