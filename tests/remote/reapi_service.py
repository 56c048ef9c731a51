"""A real Remote Execution API v2 service on loopback for tests: BuildGrid + PostgreSQL + bots.

BuildGrid 0.9.1 (`bgd`, Python >= 3.13, so it lives in its own venv) serves Execution,
Operations, Bots, CAS, ByteStream, ActionCache and Capabilities for the instance "main" on
one port; its scheduler needs PostgreSQL, so a throwaway cluster runs beside it. No worker
installs from PyPI, so tests/remote/bot.py (the test Python, grpcio + buildgrid-common's
protos) executes the actions. Plain Python (no pytest): the fixtures are in conftest.py.

Every process starts in its own process group, and `running_service` kills the groups and
removes the state (database, CAS, work dirs) on the way out; logs stay in `log_dir`.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc
from buildgrid.common.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2,
    remote_execution_pb2_grpc,
)

from buildgen.remote.runtime import RUNTIME_PROPERTY, runtime_property

INSTANCE = "main"
BOT = Path(__file__).with_name("bot.py")
READY = "bot session:"  # what bot.py logs once registered
BGD_ENV = "BUILDGEN_TEST_BGD"
BGD_VENV = Path.home() / ".cache" / "buildgen-tests" / "bgd"
INSTALL_HINTS = {
    "bgd": "run .ci/run (it makes ~/.cache/buildgen-tests/bgd, BuildGrid 0.9.1 in a Python "
           "3.13 venv) or point BUILDGEN_TEST_BGD at a bgd",
    "postgres": "apt-get install postgresql",
}
# BuildGrid has no config key for the largest batch (settings.MAX_REQUEST_SIZE, ~4 MiB, which
# Capabilities advertises and BatchUpdateBlobs/BatchReadBlobs enforce); the launcher lowers
# it before the server's modules import it, so blobs over 1 MiB must go through ByteStream.
BATCH_LIMIT = 1024 * 1024
_LAUNCHER = (
    "import sys, buildgrid.server.settings as s; s.MAX_REQUEST_SIZE = int(sys.argv.pop(1)); "
    "from buildgrid.server.app.cli import cli; sys.argv[0] = 'bgd'; cli()"
)
# Platform properties the scheduler matches on (BuildGrid adds OSFamily and ISA anyway):
# buildgen-python selects workers for the Python stages (buildgen.remote.runtime); `pool`
# is one a test's per-kind `platforms:` asks for; `gpu` is what `buildgen tune` asks of the
# workers that run its profilers (buildgen.remote.programs). The bots claim one so the
# matching is exercised: the programs the tests send them run on the CPU.
MATCH_KEYS = ("OSFamily", "ISA", RUNTIME_PROPERTY, "pool", "gpu")
POOL = "shared"
GPU = "sm_90"


def find_bgd() -> Path | None:
    """$BUILDGEN_TEST_BGD, else the venv .ci/run makes, else the one a developer made by hand."""
    candidates = [os.environ.get(BGD_ENV), BGD_VENV / "bin" / "bgd", "/tmp/bgdenv/bin/bgd"]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def find_postgres_bindir() -> Path | None:
    """The folder with initdb and postgres: Debian keeps them off PATH, in a versioned dir."""
    candidates: list[str] = []
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        candidates.append(subprocess.check_output(["pg_config", "--bindir"], text=True).strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(str(Path(initdb).resolve().parent))
    for folder in candidates:
        if all(os.access(Path(folder, tool), os.X_OK) for tool in ("initdb", "postgres")):
            return Path(folder)
    return None


def missing_tools() -> str | None:
    """Why the service cannot start here, or None."""
    missing = [name for name, found in (("bgd", find_bgd()), ("postgres", find_postgres_bindir()))
               if found is None]
    if not missing:
        return None
    return "the REAPI tests need " + "; ".join(f"{name}: {INSTALL_HINTS[name]}" for name in missing)


def host_properties() -> dict[str, str]:
    """The bots' platform properties: REAPI's standard names for this machine."""
    isa = {"x86_64": "x86-64", "amd64": "x86-64", "arm64": "aarch64"}
    machine = platform.machine().lower()
    return {"OSFamily": sys.platform.rstrip("0123456789"), "ISA": isa.get(machine, machine),
            RUNTIME_PROPERTY: runtime_property(), "pool": POOL, "gpu": GPU}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tail(path: Path, lines: int = 30) -> str:
    text = path.read_text(errors="replace") if path.exists() else "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def start_group(argv: list[str], log: Path, **kwargs: object) -> subprocess.Popen[bytes]:
    """Start argv as the leader of a new process group, stdout and stderr to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True, **kwargs)  # type: ignore[call-overload]


def stop_group(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Signal the process, wait up to 10 s, then SIGKILL what is left of its group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


# --- PostgreSQL ----------------------------------------------------------------------------


def _as_postgres_user() -> dict[str, object]:
    """initdb and postgres refuse to run as root: as root, run them as Debian's `postgres`."""
    if os.geteuid() != 0:
        return {}
    return {"user": "postgres", "group": "postgres", "extra_groups": []}


def start_postgres(bindir: Path, root: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A fresh cluster under ``root`` on a free 127.0.0.1 port; returns (process, SQL URL).

    fsync is off: the database dies with the session anyway.
    """
    user = _as_postgres_user()
    if user:
        shutil.chown(root, "postgres", "postgres")
    data = root / "data"
    run = {"cwd": root, "stdin": subprocess.DEVNULL, "capture_output": True, **user}
    initdb = subprocess.run([bindir / "initdb", "-D", data, "-U", "postgres", "-A", "trust",
                             "-E", "UTF8", "--locale=C"], **run)  # type: ignore[call-overload]
    if initdb.returncode != 0:
        raise RuntimeError(f"initdb failed: {initdb.stderr.decode(errors='replace')}")
    port = free_port()
    process = start_group(
        [str(bindir / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(port),
         "-k", str(root), "-c", "fsync=off", "-c", "synchronous_commit=off",
         "-c", "full_page_writes=off"],
        log, cwd=root, **user)
    deadline = time.monotonic() + 30
    while subprocess.run([bindir / "pg_isready", "-q", "-h", "127.0.0.1", "-p", str(port)],
                         check=False).returncode != 0:
        if process.poll() is not None or time.monotonic() > deadline:
            stop_group(process, signal.SIGINT)
            raise RuntimeError(f"postgres did not start:\n{tail(log)}")
        time.sleep(0.1)
    subprocess.run([bindir / "createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
                    "bgd"], check=True, capture_output=True)
    return process, f"postgresql+psycopg://postgres@127.0.0.1:{port}/bgd"


# --- BuildGrid -----------------------------------------------------------------------------


def bgd_config(port: int, database: str, cas: Path) -> str:
    """The server's YAML: one instance, disk CAS, an LRU action cache, the SQL scheduler.

    Failed actions are not cached, so a test can run a failing command again. The assigner
    matches queued jobs to bots every 50 ms plus up to 50 ms of jitter: the defaults (1 s,
    plus up to 1 s) made each action wait ~0.5-1 s before a bot got it.
    """
    keys = ", ".join(MATCH_KEYS)
    return f"""\
server:
  - !channel
    address: "127.0.0.1:{port}"
    insecure-mode: true
connections:
  - !sql-connection &sql
    connection-string: {database}
storages:
  - !disk-storage &cas
    path: {cas}
caches:
  - !lru-action-cache &ac
    storage: *cas
    max-cached-refs: 100000
    allow-updates: true
    cache-failed-actions: false
schedulers:
  - !sql-scheduler &scheduler
    sql: *sql
    storage: *cas
    action-cache: *ac
    bot-session-keepalive-timeout: 600
    property-set: !dynamic-property-set
      match-property-keys: [{keys}]
    assigners:
      - !priority-age-assigner
        interval: 0.05
        jitter-factor: 0.05
instances:
  - name: {INSTANCE}
    services:
      - !action-cache
        cache: *ac
      - !execution
        scheduler: *scheduler
      - !cas
        storage: *cas
      - !bytestream
        storage: *cas
thread-pool-size: 64
"""


def bgd_python(bgd: Path) -> str:
    """The interpreter of bgd's venv (bin/python beside it), to run the launcher with."""
    return str(bgd.parent / "python")


def migrate(bgd: Path, database: str, log: Path) -> None:
    """Create BuildGrid's tables (alembic, via `bgd migrate apply`)."""
    with open(log, "ab") as out:
        done = subprocess.run([str(bgd), "migrate", "apply", database], stdout=out, stderr=out,
                              stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bgd migrate apply failed:\n{tail(log)}")


def start_bgd(bgd: Path, config: Path, log: Path) -> subprocess.Popen[bytes]:
    return start_group([bgd_python(bgd), "-c", _LAUNCHER, str(BATCH_LIMIT), "server", "start",
                        str(config)], log)


def wait_for_capabilities(address: str, process: subprocess.Popen[bytes], log: Path,
                          timeout: float = 90) -> None:
    """Return once GetCapabilities answers for the instance; raise with the log's end if not."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address.removeprefix("grpc://")) as channel:
        stub = remote_execution_pb2_grpc.CapabilitiesStub(channel)
        request = remote_execution_pb2.GetCapabilitiesRequest(instance_name=INSTANCE)
        while True:
            try:
                stub.GetCapabilities(request, timeout=2)
                return
            except grpc.RpcError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"bgd did not answer on {address}:\n{tail(log)}") from None
                time.sleep(0.2)


def start_bot(address: str, bot_id: str, work_dir: Path, executed: Path,
              properties: Mapping[str, str], log: Path, faults: Path,
              cas: Path) -> subprocess.Popen[bytes]:
    work_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, str(BOT), "--server", address, "--instance", INSTANCE,
            "--bot-id", bot_id, "--work-dir", str(work_dir), "--log", str(executed),
            "--faults", str(faults), "--cas-dir", str(cas)]
    argv += ["--properties", *(f"{k}={v}" for k, v in properties.items())]
    return start_group(argv, log)


def wait_for_bot(process: subprocess.Popen[bytes], log: Path, timeout: float = 30) -> None:
    """Return once the bot logged its session: then an Execute finds it registered."""
    deadline = time.monotonic() + timeout
    while READY not in (log.read_text(errors="replace") if log.exists() else ""):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"bot did not register:\n{tail(log)}")
        time.sleep(0.05)


# --- The whole service ---------------------------------------------------------------------


@dataclass(frozen=True)
class ReapiService:
    address: str  # grpc://127.0.0.1:<port>
    instance: str
    bot_properties: dict[str, str]  # every bot has all of these
    executed_log: Path  # one JSON line per lease the bots ran
    log_dir: Path  # server.log, postgres.log, bot-<n>.log, bgd.yml
    faults_dir: Path  # the bots' faults (bot.py): inject() writes them

    def inject(self, mode: str, match: str, **params: object) -> None:
        """One fault, for the first lease whose command line contains `match` (bot.py)."""
        name = f"{len(list(self.faults_dir.iterdir())):04d}-{mode}.json"
        write = self.faults_dir / f".{name}"
        write.write_text(json.dumps({"match": match, "mode": mode, **params}))
        write.rename(self.faults_dir / name)  # whole, or not there: a bot may look any time

    def clear_faults(self) -> list[str]:
        """Remove every fault; returns those no lease took."""
        left = [p.name for p in self.faults_dir.glob("*.json")]
        for path in self.faults_dir.iterdir():
            path.unlink()
        return left

    def executed(self) -> list[dict[str, object]]:
        """The bots' records, oldest first: {"bot", "action", "argv", "exit_code", "outputs",
        "seconds"} (the command's time on the bot), and "fault" for an injected one.

        A bot writes its record before it reports the result, so a finished Execute's
        record is already here.
        """
        if not self.executed_log.exists():
            return []
        return [json.loads(line) for line in self.executed_log.read_text().splitlines()]


@contextlib.contextmanager
def running_service(log_dir: Path, bots: int = 2,
                    properties: Mapping[str, str] | None = None) -> Iterator[ReapiService]:
    """PostgreSQL, then `bgd migrate apply`, then the server, then ``bots`` bots."""
    bgd, bindir = find_bgd(), find_postgres_bindir()
    if bgd is None or bindir is None:
        raise FileNotFoundError(missing_tools())
    properties = dict(host_properties() if properties is None else properties)
    log_dir.mkdir(parents=True, exist_ok=True)
    state = Path(tempfile.mkdtemp(prefix="buildgen-reapi-"))
    database_root = Path(tempfile.mkdtemp(prefix="buildgen-reapi-pg-"))
    processes: list[tuple[subprocess.Popen[bytes], int]] = []  # stopped in reverse order
    try:
        postgres, database = start_postgres(bindir, database_root, log_dir / "postgres.log")
        processes.append((postgres, signal.SIGINT))  # SIGINT: postgres's fast shutdown
        migrate(bgd, database, log_dir / "server.log")
        port = free_port()
        config = log_dir / "bgd.yml"
        config.write_text(bgd_config(port, database, state / "cas"))
        server = start_bgd(bgd, config, log_dir / "server.log")
        processes.append((server, signal.SIGTERM))
        address = f"grpc://127.0.0.1:{port}"
        wait_for_capabilities(address, server, log_dir / "server.log")
        executed = log_dir / "executed.jsonl"
        faults = state / "faults"
        faults.mkdir()
        started = []
        for n in range(bots):
            log = log_dir / f"bot-{n}.log"
            bot = start_bot(address, f"bot-{n}", state / f"bot-{n}", executed, properties, log,
                            faults, state / "cas")
            processes.append((bot, signal.SIGTERM))
            started.append((bot, log))
        for bot, log in started:
            wait_for_bot(bot, log)
        yield ReapiService(address, INSTANCE, properties, executed, log_dir, faults)
    finally:
        for process, sig in reversed(processes):
            stop_group(process, sig)
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(database_root, ignore_errors=True)
