"""The worker's runners (buildgen/worker/runner.py): one process serves action after
action, and nothing of one action reaches the next.

Each action here is a shell command run through the real client and worker; it writes what
it sees ($PPID is the runner that ran it: the wrapper starts the command as its child).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from test_workers import _client_command, stop_worker, wait_for_worker

SEES = 'echo "$PPID ${MARK-unset} $(umask) $(pwd)" > out.txt'


def _start(tmp_path: Path, **extra: str) -> tuple[list[str], dict[str, str], int]:
    """A worker serving the client's identity (its first action runs cold and starts it)."""
    workers = tmp_path / "workers"
    argv, env = _client_command(workers, "true")
    env.update(extra)
    subprocess.run(argv, cwd=tmp_path, env=env, check=True, timeout=120)
    identity = argv[argv.index("--worker") + 1]
    return argv, env, wait_for_worker(workers, identity)


def _action(workers: Path, shell: str, stoppable: bool = False) -> list[str]:
    """The client's command line for `shell`; `stoppable`: as gen writes a C compile's
    (the wrapper may start it before its lookup)."""
    argv, _env = _client_command(workers, "sh", "-c", shell)
    if stoppable:
        argv.insert(argv.index("--out"), "--stoppable")
    return argv


def _run(argv: list[str], cwd: Path, env: dict[str, str], umask: int = 0o022) -> list[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, timeout=120, capture_output=True, text=True,
                          preexec_fn=lambda: os.umask(umask))
    assert done.returncode == 0, done.stdout + done.stderr
    return (cwd / "out.txt").read_text().split()


def _stop(tmp_path: Path, argv: list[str], pid: int) -> str:
    return stop_worker(tmp_path / "workers", argv[argv.index("--worker") + 1], pid)


def test_one_runner_serves_actions_in_turn_and_each_sees_only_its_own_state(tmp_path):
    argv, env, pid = _start(tmp_path)
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    action = _action(tmp_path / "workers", SEES)
    runner, mark, mask, cwd = _run(action, first, {**env, "MARK": "first"}, umask=0o077)
    assert (mark, mask, cwd) == ("first", "0077", str(first))
    again = _run(action, second, env)
    assert again == [runner, "unset", "0022", str(second)]
    assert int(runner) in _children(pid)  # a runner of this worker, still there
    assert "served" in _stop(tmp_path, argv, pid)


def test_a_restored_output_gets_the_umask_of_the_action_that_restores_it(tmp_path):
    """The cache writes restored files with the action's umask: a runner must not keep the
    umask an earlier action had."""
    argv, env, pid = _start(tmp_path)
    env = {**env, "BUILDGEN_CACHE": "on", "BUILDGEN_CACHE_DIR": str(tmp_path / "cache")}
    action = _action(tmp_path / "workers", "echo same > out.txt")
    _run(action, tmp_path, env, umask=0o077)
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o600
    (tmp_path / "out.txt").unlink()
    _run(action, tmp_path, env, umask=0o022)  # a hit: written by the cache, not by sh
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o644
    _stop(tmp_path, argv, pid)


def test_parallel_actions_get_parallel_runners(tmp_path):
    argv, env, pid = _start(tmp_path)
    action = _action(tmp_path / "workers", 'echo "$PPID" > out.txt; sleep 2')
    folders = [tmp_path / f"job{i}" for i in range(3)]
    running = []
    for folder in folders:
        folder.mkdir()
        running.append(subprocess.Popen(action, cwd=folder, env=env))
    assert [job.wait(timeout=120) for job in running] == [0, 0, 0]
    runners = {(folder / "out.txt").read_text().strip() for folder in folders}
    assert len(runners) == 3
    _stop(tmp_path, argv, pid)


def test_a_runner_whose_action_was_interrupted_serves_no_more(tmp_path):
    argv, env, pid = _start(tmp_path)
    before = _run(_action(tmp_path / "workers", SEES), tmp_path, env)[0]
    (tmp_path / "out.txt").unlink()
    slow = subprocess.Popen(_action(tmp_path / "workers", SEES + "; sleep 30"), cwd=tmp_path,
                            env=env)
    deadline = time.monotonic() + 60
    while not (tmp_path / "out.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "out.txt").read_text().split()[0] == before  # the same runner
    slow.send_signal(signal.SIGINT)  # as ninja's Ctrl-C: the client passes it on
    assert slow.wait(timeout=60) == 130
    deadline = time.monotonic() + 10
    while int(before) in _children(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert int(before) not in _children(pid)
    after = _run(_action(tmp_path / "workers", SEES), tmp_path, env)[0]
    assert after != before
    _stop(tmp_path, argv, pid)


def test_a_changed_python_installation_stops_the_worker_and_loses_no_action(tmp_path):
    """Installing a distribution changes its site folder: the runner that takes the next
    connection turns it away, its client runs the action itself, and the worker stops."""
    from test_workers import REPO

    site = tmp_path / "extra-packages"  # a site folder by its name, on the worker's path
    site.mkdir()
    workers = tmp_path / "workers"
    pythonpath = os.pathsep.join([str(REPO), str(site)])
    argv, env = _client_command(workers, "sh", "-c", SEES, pythonpath=pythonpath)
    identity = argv[argv.index("--worker") + 1]
    subprocess.run(argv, cwd=tmp_path, env=env, check=True, timeout=120)  # starts it
    pid = wait_for_worker(workers, identity)
    runner = int(_run(argv, tmp_path, env)[0])
    assert runner in _children(pid)
    later = time.time() + 5
    os.utime(site, (later, later))  # as an install would
    assert int(_run(argv, tmp_path, env)[0]) not in (runner, *_children(pid))
    deadline = time.monotonic() + 30
    log = workers / f"{identity}.log"
    while "exiting: Python distributions changed" not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


def _children(pid: int) -> list[int]:
    from test_workers import _children as children

    return children(pid)


def test_a_miss_is_in_the_cache_once_its_stores_are_waited_for(tmp_path):
    """The runner replies before it writes the action's stores (cache/write_behind.py);
    `buildgen build` waits for them after ninja, as this test does, and then finds all."""
    from buildgen.cache import write_behind
    from buildgen.cache.stats import read_stats

    argv, env, pid = _start(tmp_path)
    cache = tmp_path / "cache"
    env = {**env, "BUILDGEN_CACHE": "on", "BUILDGEN_CACHE_DIR": str(cache)}
    action = _action(tmp_path / "workers", "echo ran >> ../runs.log; echo same > out.txt")
    build = tmp_path / "build"
    build.mkdir()
    for _ in range(5):
        (build / "out.txt").unlink(missing_ok=True)
        _run(action, build, env)
        write_behind.wait_for_stores(build)
    assert (tmp_path / "runs.log").read_text() == "ran\n"  # then four hits
    counts = dict(read_stats(cache).days[-1][1])
    assert counts == {"local": 4, "ran": 1}
    _stop(tmp_path, argv, pid)


def test_a_hit_for_an_output_already_there_stops_the_command_started_before_its_lookup(
        tmp_path):
    """Ninja re-runs an action whose output is there after an edit, so a runner starts its
    command before the lookup (cache/exec.py); when the lookup hits after all (the edit
    undone), the command and all it started are stopped and the cached output restored."""
    from buildgen.cache import write_behind
    from buildgen.cache.journal import read_entries

    argv, env, pid = _start(tmp_path)
    env = {**env, "BUILDGEN_CACHE": "on", "BUILDGEN_CACHE_DIR": str(tmp_path / "cache")}
    build = tmp_path / "build"
    build.mkdir()
    # The second run of "a" sleeps: were it not stopped, it would write "finished".
    tool = ('echo started >> ../runs.log; if [ "$(cat in.txt)" = a ] && [ -e ../a.done ];'
            ' then sleep 60 & echo $! > ../sleep.pid; wait; fi;'
            ' cat in.txt > out.txt; touch ../$(cat in.txt).done; echo finished >> ../runs.log')
    action = _action(tmp_path / "workers", tool, stoppable=True)
    at = action.index("--")
    action[at:at] = ["--in", "in.txt", "big.bin"]
    with open(build / "big.bin", "wb") as big:
        big.truncate(64 << 20)  # hashed again after each touch: the sleep starts meanwhile
    for text in ("a", "b", "a"):
        (build / "in.txt").write_text(text)
        os.utime(build / "big.bin")
        _run(action, build, env)
        write_behind.wait_for_stores(build)
    assert (build / "out.txt").read_text() == "a"
    assert (tmp_path / "runs.log").read_text().split() == [
        "started", "finished", "started", "finished", "started"]
    assert [entry.outcome for entry in read_entries(build)] == ["ran", "ran", "local"]
    sleeper = int((tmp_path / "sleep.pid").read_text())
    deadline = time.monotonic() + 10
    while _alive(sleeper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(sleeper)  # the command's whole group was stopped, not its shell alone
    plain = _action(tmp_path / "workers", tool)  # not --stoppable: looked up first, as ever
    plain[plain.index("--"):plain.index("--")] = ["--in", "in.txt", "big.bin"]
    _run(plain, build, env)
    assert (tmp_path / "runs.log").read_text().count("started") == 3
    _stop(tmp_path, argv, pid)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_an_interrupt_reaches_a_command_started_before_its_lookup(tmp_path):
    argv, env, pid = _start(tmp_path)
    env = {**env, "BUILDGEN_CACHE": "on", "BUILDGEN_CACHE_DIR": str(tmp_path / "cache")}
    (tmp_path / "out.txt").write_text("from an earlier build\n")  # so it starts early
    slow = subprocess.Popen(
        _action(tmp_path / "workers", "echo $$ > shell.pid; sleep 30; echo late > out.txt",
                stoppable=True),
        cwd=tmp_path, env=env)
    deadline = time.monotonic() + 60
    marker = tmp_path / "shell.pid"
    while not (marker.exists() and marker.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    shell = int(marker.read_text())
    slow.send_signal(signal.SIGINT)
    assert slow.wait(timeout=60) == 130
    deadline = time.monotonic() + 10
    while _alive(shell) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(shell)
    assert not (tmp_path / "out.txt").exists()  # removed before the start, never written
    _stop(tmp_path, argv, pid)
