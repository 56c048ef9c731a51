"""Helpers of the fault trials: tiny projects, builds in their own session, /proc scans.

Every build runs `python -m buildgen build` with PYTHONPATH naming this checkout (never an
installed buildgen), its own cache folder (BUILDGEN_CACHE_DIR) and its own worker folder
(BUILDGEN_WORKER_DIR), so the workers a test starts are its own and it stops them after.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "ninja"))
from small_project import save_tiny_model  # noqa: E402

# Files of the build dir that are ninja's or buildgen's bookkeeping, not products:
# build.ninja differs with the cache and workers on or off (its commands do).
BOOKKEEPING = {"build.ninja", ".ninja_log", ".ninja_deps"}
# What a killed action may leave behind that nothing reads: write_atomic's temp files
# (".<name>.<random>.tmp") and a compile's depfile that ninja never got to read.
LEFTOVER = re.compile(r"(^|/)\.[^/]+\.tmp$|\.o\.d$")


def write_project(root: Path, hiddens: Iterable[int], name: str | None = None) -> Path:
    """root/BUILD.yaml: one tiny model per hidden size (named `m<hidden>`, or `name` when
    there is one model), each for one cheap c target (one ISA level: `march: x86-64`,
    -O1). Same arguments, same bytes."""
    names = []
    for hidden in hiddens:
        names.append(name or f"m{hidden}")
        save_tiny_model(root / "models" / f"{names[-1]}.onnx", hidden=hidden)
    models = "".join(
        f"  {name}: {{source: models/{name}.onnx, inputs: {{x: [2, 4]}}, targets: [small]}}\n"
        for name in names
    )
    (root / "BUILD.yaml").write_text(
        "buildgen: 1\n"
        "targets:\n  small: {kind: c, opt_level: 1, march: x86-64}\n"
        f"models:\n{models}"
    )
    return root


def environment(cache_dir: Path, worker_dir: Path, *, cache: bool, workers: bool,
                **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")}
    env["BUILDGEN_PREBUILT"] = "off"  # as tests/conftest.py says
    env["PYTHONPATH"] = str(REPO)
    env["BUILDGEN_CACHE_DIR"] = str(cache_dir)
    env["BUILDGEN_WORKER_DIR"] = str(worker_dir)
    if not cache:
        env["BUILDGEN_CACHE"] = "off"
    if not workers:
        env["BUILDGEN_WORKERS"] = "off"
    env.update(extra)
    return env


def build_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "buildgen", "build", *args]


def run_build(project: Path, env: dict[str, str], *args: str,
              timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(build_argv(*args), cwd=project, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def products(build: Path) -> dict[str, bytes]:
    """Every file the build made (libraries, headers, sources, objects, reports, stage
    outputs), by path under `build`, less ninja's and buildgen's bookkeeping."""
    found = {}
    for path in sorted(build.rglob("*")):
        rel = path.relative_to(build).as_posix()
        if rel in BOOKKEEPING or rel.startswith(".buildgen/") or not path.is_file():
            continue
        found[rel] = path.read_bytes()
    return found


@dataclass
class Comparison:
    missing: list[str] = field(default_factory=list)
    differ: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)  # not in the reference, not a leftover
    leftovers: list[str] = field(default_factory=list)  # temp files, unread depfiles

    @property
    def wrong(self) -> bool:
        return bool(self.missing or self.differ or self.unexpected)

    def __str__(self) -> str:
        return (f"missing {self.missing}, differ {self.differ}, unexpected {self.unexpected}, "
                f"leftovers {self.leftovers}")


def compare(build: Path, reference: dict[str, bytes]) -> Comparison:
    got = products(build)
    result = Comparison()
    for name, data in reference.items():
        if name not in got:
            result.missing.append(name)
        elif got[name] != data:
            result.differ.append(name)
    for name in sorted(set(got) - set(reference)):
        (result.leftovers if LEFTOVER.search(name) else result.unexpected).append(name)
    return result


def buildgen_sources_mtime() -> int:
    """The newest mtime of what gen and the stages read from this checkout: a build of a
    test that overlaps an edit of buildgen (a developer's working tree) proves nothing."""
    newest = 0
    for top in ("buildgen", "rules", "schemas"):
        for folder, _, names in os.walk(REPO / top):
            for name in names:
                with contextlib.suppress(OSError):
                    newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime_ns)
    return newest


# -- processes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    pid: int
    state: str
    ppid: int
    pgid: int
    sid: int


def processes() -> Iterator[Proc]:
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        yield Proc(int(entry.name), fields[0], int(fields[1]), int(fields[2]), int(fields[3]))


def alive(procs: Iterable[Proc]) -> list[Proc]:
    return [p for p in procs if p.state not in ("Z", "X")]


def session_members(sid: int) -> list[Proc]:
    """The live processes of session `sid`: the build, ninja, and every action ninja
    started (each in a process group of its own, all in ninja's session)."""
    return alive(p for p in processes() if p.sid == sid)


def kill_session(sid: int, timeout: float = 60.0) -> int:
    """SIGKILL every process of session `sid` and every process group found in it, again
    and again until none is left (ninja may fork between a scan and the kill); returns
    how many distinct processes were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        members = session_members(sid)
        if not members:
            return len(killed)
        if time.monotonic() > deadline:
            raise AssertionError(f"session {sid} survives SIGKILL: {members}")
        for group in {p.pgid for p in members}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        for p in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
            killed.add(p.pid)
        time.sleep(0.005)


def worker_servers(worker_dir: Path) -> list[int]:
    """The pids of the worker servers (not their per-action children) of `worker_dir`."""
    found = []
    for p in alive(processes()):
        if p.sid != p.pid:
            continue  # a server is a session leader; its per-action children are not
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{p.pid}/cmdline").read_bytes().split(b"\0")
            if b"buildgen.worker.server" in argv and str(worker_dir).encode() in argv:
                found.append(p.pid)
    return found


def worker_action_groups(worker_dir: Path) -> set[int]:
    """The process groups of the actions the workers of `worker_dir` are running now (each
    action runs in a runner, a fork of a server, in a group of its own while it runs; an
    idle runner waits in its server's group)."""
    servers = set(worker_servers(worker_dir))
    return {p.pgid for p in alive(processes()) if p.ppid in servers and p.pgid != p.ppid}


def wait_groups_gone(groups: set[int], timeout: float) -> list[Proc]:
    """Wait until no live process is in any of `groups`; returns what is left."""
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in alive(processes()) if p.pgid in groups]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


def stop_workers(worker_dir: Path, timeout: float = 30.0) -> None:
    """SIGTERM the workers this test started (found by their folder), and wait."""
    pids = worker_servers(worker_dir)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        if not [p for p in alive(processes()) if p.pid in pids]:
            break
        time.sleep(0.05)


@contextlib.contextmanager
def worker_folder() -> Iterator[Path]:
    """A private worker folder with a short path (a socket's path has at most 107 bytes,
    which pytest's tmp_path can pass); its workers are stopped and it is removed after."""
    folder = Path(tempfile.mkdtemp(prefix="bgfw-"))
    try:
        yield folder
    finally:
        stop_workers(folder)
        shutil.rmtree(folder, ignore_errors=True)


def start_worker(project: Path, env: dict[str, str], timeout: float = 120.0) -> None:
    """Warm the worker a build of `project` uses: gen, then one trivial action through the
    client (which starts the worker in the background), then wait for its socket."""
    done = subprocess.run([sys.executable, "-m", "buildgen", "gen"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    ninja = (project / "build" / "build.ninja").read_text()
    # Through the client gen compiled, or through client.py (buildgen/worker/native.py).
    found = (re.search(r"(\S+) --python (\S+) --worker ([0-9a-f]+) ", ninja)
             or re.search(r"(\S+) -S (\S+/worker/client\.py) --worker ([0-9a-f]+) ", ninja))
    assert found, "build.ninja runs no action through a worker"
    if "--python" in found[0]:
        client, python, identity = found.groups()
        start = [str(project / "build" / client), "--python", python]
    else:
        python, client, identity = found.groups()
        start = [python, "-S", client]
    scratch = project / "build" / ".buildgen" / "warm-up"
    scratch.mkdir(parents=True, exist_ok=True)
    argv = [*start, "--worker", identity, "exec", "--root", ".", "--rule",
            "warm-up", "--out", "out", "--", "true"]
    subprocess.run(argv, cwd=scratch, env={**env, "BUILDGEN_CACHE": "off"}, check=True,
                   timeout=120)
    sock = Path(env["BUILDGEN_WORKER_DIR"]) / f"{identity}.sock"
    deadline = time.monotonic() + timeout
    while not sock.exists():
        assert time.monotonic() < deadline, f"no worker came up in {sock.parent}"
        time.sleep(0.1)
    shutil.rmtree(scratch, ignore_errors=True)


def summary_counts(output: str) -> dict[str, int]:
    """`buildgen: N actions: R ran, L restored from the local cache, ...` as numbers."""
    found = re.search(
        r"buildgen: (\d+) actions: (\d+) ran, (\d+) restored from the local cache, "
        r"(\d+) from the remote cache, (\d+) up to date", output)
    if not found:
        return {}
    return dict(zip(("actions", "ran", "local", "remote", "up_to_date"),
                    map(int, found.groups()), strict=True))
