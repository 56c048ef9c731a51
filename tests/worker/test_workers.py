"""Persistent stage workers (buildgen/worker) under real builds of a small model.

Each test has its own worker folder (BUILDGEN_WORKER_DIR), so its workers are its own: the
worker's log says what it served, and the test stops it (SIGTERM) when done.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from buildgen.worker.client import connect, socket_path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "cmake"))
from tiny_project import save_model  # noqa: E402

MANIFEST = """\
buildgen: 1
targets:
  small: {kind: c, opt_level: 1, march: x86-64}
models:
  tiny:
    source: models/tiny.onnx
    inputs: {x: [2, 4]}
    targets: [small]
"""
# What the build makes, compared byte for byte between builds.
PRODUCTS = (
    "tiny/graph.json", "tiny/small/partition.json", "tiny/small/src/model.c",
    "tiny/small/include/tiny.h", "tiny/small/libtiny.so", "tiny/small/report.json",
)


def make_project(folder: Path) -> Path:
    save_model(folder / "models", seed=3)
    (folder / "BUILD.yaml").write_text(MANIFEST)
    return folder


def environment(workers: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")}
    env["BUILDGEN_PREBUILT"] = "off"  # as tests/conftest.py says
    env["PYTHONPATH"] = str(REPO)
    env["BUILDGEN_WORKER_DIR"] = str(workers)
    env["BUILDGEN_CACHE_DIR"] = str(workers.parent / "cache")
    env.update(extra)
    return env


def build(project: Path, env: dict[str, str], python: str = sys.executable) -> str:
    done = subprocess.run(
        [python, "-m", "buildgen", "build"], cwd=project, env=env, capture_output=True,
        text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def products(project: Path) -> dict[str, bytes]:
    return {name: (project / "build" / name).read_bytes() for name in PRODUCTS}


def identity_of(project: Path) -> str:
    found = re.search(r"--worker ([0-9a-f]+) ", (project / "build" / "build.ninja").read_text())
    assert found, "build.ninja does not start its actions through a worker"
    return found[1]


def wait_for_worker(workers: Path, identity: str, timeout: float = 120.0) -> int:
    """The pid of the worker serving `identity`, once its socket accepts."""
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_UNIX) as probe:
            try:
                connect(probe, str(workers), identity)
            except OSError:
                time.sleep(0.2)
                continue
        log = (workers / f"{identity}.log").read_text()
        return int(re.search(r"worker (\d+): serving", log)[1])
    raise AssertionError(f"no worker came up: {list(workers.iterdir())}")


def stop_worker(workers: Path, identity: str, pid: int) -> str:
    """Stop it as a user would (SIGTERM) and return its log once it has exited."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while Path(socket_path(str(workers), identity)).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    log = (workers / f"{identity}.log").read_text()
    assert "exiting: stopped (SIGTERM)" in log, log
    return log


def served(log: str) -> int:
    return int(re.search(r"served (\d+) actions", log)[1])


def cache_command(project: Path) -> str:
    return re.search(r"^cache = (.*)$", (project / "build" / "build.ninja").read_text(),
                     re.M)[1]


@pytest.mark.parametrize("client", ["compiled", "python"])
def test_builds_through_a_worker_are_the_builds_without_one(tmp_path, client):
    """Through either client (client.c compiled at gen, or client.py)."""
    workers = tmp_path / "workers"
    chosen = {"BUILDGEN_WORKER_CLIENT": client}
    cold = make_project(tmp_path / "cold")
    build(cold, environment(workers, BUILDGEN_WORKERS="off", BUILDGEN_CACHE="off"))
    assert not workers.exists() or not list(workers.glob("*.sock"))
    expected = products(cold)

    warm = make_project(tmp_path / "warm")
    build(warm, environment(workers, **chosen))  # starts a worker in the background
    started = cache_command(warm).split()[0]
    assert started.startswith(".buildgen/worker-client-") == (client == "compiled"), started
    identity = identity_of(warm)
    pid = wait_for_worker(workers, identity)
    for cache in ("on", "off"):  # through the wrapper, and stages through the client
        shutil.rmtree(warm / "build")
        shutil.rmtree(tmp_path / "cache", ignore_errors=True)
        build(warm, environment(workers, BUILDGEN_CACHE=cache, **chosen))
        assert products(warm) == expected, f"cache {cache}"
    log = stop_worker(workers, identity, pid)
    # Every action of the two builds but gen (3 stages, report, 3 compiles, link, archive).
    assert served(log) >= 2 * 8, log
    assert not list(workers.glob(f"{identity}.*")) or {
        p.name for p in workers.glob(f"{identity}.*")} == {f"{identity}.log"}


def test_a_worker_killed_mid_build_costs_nothing_but_time(tmp_path):
    workers = tmp_path / "workers"
    project = make_project(tmp_path / "p")
    env = environment(workers, BUILDGEN_CACHE="off")
    build(project, env)
    expected = products(project)
    identity = identity_of(project)
    pid = wait_for_worker(workers, identity)
    shutil.rmtree(project / "build")
    running = subprocess.Popen(
        [sys.executable, "-m", "buildgen", "build"], cwd=project, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    # Kill the worker and every action it is running, as the OOM killer would.
    deadline = time.monotonic() + 120
    while not _children(pid) and time.monotonic() < deadline and running.poll() is None:
        time.sleep(0.01)
    victims = _children(pid)
    assert victims, "the build ended before the worker ran an action"
    for victim in [*victims, pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
    out, _ = running.communicate(timeout=600)
    assert running.returncode == 0, out
    assert products(project) == expected


def test_an_unsafe_worker_folder_is_not_used(tmp_path):
    workers = tmp_path / "workers"
    workers.mkdir(mode=0o777)
    workers.chmod(0o777)  # others could plant a socket here
    project = make_project(tmp_path / "p")
    build(project, environment(workers, BUILDGEN_CACHE="off"))
    assert list(workers.iterdir()) == []


def test_a_worker_serves_only_the_identity_it_is(tmp_path):
    workers = tmp_path / "workers"
    workers.mkdir(mode=0o700)
    done = subprocess.run(
        [sys.executable, "-m", "buildgen.worker.server", str(workers), "0" * 32],
        env=environment(workers), capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 1 and "asked to be 0000" in done.stderr
    assert not list(workers.glob("*.sock"))


@pytest.mark.skipif(sys.platform != "linux", reason="symlinked interpreters")
def test_python_and_python3_are_one_interpreter_to_the_build(tmp_path):
    """`python -m buildgen build` after `python3 -m buildgen build`: nothing to do."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = os.path.realpath(sys.executable)
    (bin_dir / "python3.x").symlink_to(real)
    for name in ("python", "python3"):
        (bin_dir / name).symlink_to("python3.x")
    project = make_project(tmp_path / "p")
    env = environment(tmp_path / "workers", BUILDGEN_WORKERS="off")
    build(project, env, python=str(bin_dir / "python3"))
    assert "python3.x -m buildgen.stages" in (project / "build" / "build.ninja").read_text()
    again = build(project, env, python=str(bin_dir / "python"))
    assert "no work to do" in again, again


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _client_command(workers: Path, *command: str, pythonpath: str | None = None
                    ) -> tuple[list[str], dict[str, str]]:
    """A cached action's command line as build.ninja has it, running `command`;
    `pythonpath`: the environment's PYTHONPATH instead of the repository alone."""
    from buildgen.ninja.context import python_command
    from buildgen.worker import client
    from buildgen.worker.identity import worker_identity

    python = python_command()
    env = environment(workers, BUILDGEN_CACHE="off")
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    # The PYTHONPATH the client (so the worker it starts) will have: `env PYTHONPATH=...`
    # in the command when buildgen is not installed, else the environment's.
    pythonpath = next((word.partition("=")[2] for word in python[:-1]
                       if word.startswith("PYTHONPATH=")), env["PYTHONPATH"])
    argv = [*python, "-S", client.__file__, "--worker", worker_identity(python[-1], pythonpath),
            "exec", "--root", ".", "--rule", "cc", "--out", "out.txt", "--", *command]
    return argv, env


def test_an_action_whose_build_is_killed_stops_too(tmp_path):
    """kill -9 of the client (ninja's process group killed by a CI timeout) kills the
    action in the worker: nothing writes after the build is gone."""
    workers = tmp_path / "workers"
    argv, env = _client_command(workers, "true")
    subprocess.run(argv, cwd=tmp_path, env=env, check=True)  # starts the worker
    pid = wait_for_worker(workers, argv[argv.index("--worker") + 1])
    slow, _ = _client_command(workers, "sh", "-c", "sleep 3; echo late > out.txt")
    running = subprocess.Popen(slow, cwd=tmp_path, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not [c for c in _children(pid) if _children(c)]:
        time.sleep(0.01)  # until the action's own command (sh) runs
    (action,) = _children(pid)
    running.kill()
    running.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{action}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{action}").exists() or "Z" in _state(action)
    time.sleep(4)
    assert not (tmp_path / "out.txt").exists()
    stop_worker(workers, argv[argv.index("--worker") + 1], pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return "gone"


def test_a_worker_folder_deeper_than_a_socket_address_still_serves(tmp_path):
    """A socket's address holds 107 bytes; a deep TMPDIR must not turn workers off. The
    worker lives in its folder, not in the build's (which it would keep busy)."""
    workers = tmp_path / ("deep-" * 16) / "workers"
    project = make_project(tmp_path / "p")
    env = environment(workers, BUILDGEN_CACHE="off")
    build(project, env)
    identity = identity_of(project)
    assert len(os.fsencode(socket_path(str(workers), identity))) > 107
    pid = wait_for_worker(workers, identity)
    assert os.readlink(f"/proc/{pid}/cwd") == str(workers)
    shutil.rmtree(project / "build")
    build(project, env)
    assert served(stop_worker(workers, identity, pid)) > 0


def test_the_compiled_client_comes_back_and_its_absence_costs_nothing(tmp_path):
    """A deleted client is written again by the gen that ninja runs for a missing output;
    where no C compiler works, actions start through client.py."""
    workers = tmp_path / "workers"
    project = make_project(tmp_path / "p")
    build(project, environment(workers, BUILDGEN_WORKERS="off"))
    client = project / "build" / cache_command(project).split()[0]
    client.unlink()
    done = subprocess.run([sys.executable, "-m", "ninja", "-C", str(project / "build")],
                          env=environment(workers, BUILDGEN_WORKERS="off"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert os.access(client, os.X_OK)

    other = make_project(tmp_path / "q")
    build(other, environment(workers, BUILDGEN_WORKERS="off", CC="/bin/false"))
    assert "client.py" in cache_command(other)
    assert not list((other / "build" / ".buildgen").glob("worker-client-*"))
