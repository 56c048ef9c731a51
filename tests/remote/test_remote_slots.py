"""The local slots that keep a remote build's local actions to this machine's cores
(buildgen.remote.slots): never more holders than slots, a killed holder frees its slot, and
a build whose executor fails runs its fallbacks at most local_jobs at a time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from buildgen.remote.slots import local_slot

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("slots", [1, 3])
def test_never_more_holders_than_slots(tmp_path: Path, slots: int) -> None:
    inside, most = 0, 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        with local_slot(tmp_path, slots):
            with lock:
                inside += 1
                most = max(most, inside)
            time.sleep(0.02)
            with lock:
                inside -= 1

    threads = [threading.Thread(target=work) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most == slots  # every slot was used, none twice


def test_a_killed_holder_frees_its_slot(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            sys.path.insert(0, {str(REPO)!r})
            from pathlib import Path
            from buildgen.remote.slots import local_slot
            with local_slot(Path({str(tmp_path)!r}), 1):
                print("held", flush=True)
                time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        got = threading.Event()

        def take() -> None:
            with local_slot(tmp_path, 1):
                got.set()

        waiter = threading.Thread(target=take, daemon=True)
        waiter.start()
        assert not got.wait(0.3)  # the slot is held
        os.kill(holder.pid, signal.SIGKILL)
        assert got.wait(10)
    finally:
        holder.kill()
        holder.wait()


def _launcher(folder: Path) -> Path:
    """A compiler launcher that logs when each compile starts and ends. The cache's key
    probes every tool of a command once with `--version` (buildgen.cache.tools), outside
    any slot: that is no compile, and is not logged."""
    script = folder / "log-launcher"
    log = folder / "compiles.log"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = --version ]; then echo "log-launcher 1"; exit 0; fi
        echo "start $(date +%s.%N)" >> {log}
        "$@"
        status=$?
        echo "end $(date +%s.%N)" >> {log}
        exit $status
    """))
    script.chmod(0o755)
    return script


def _most_at_once(log: Path) -> int:
    events = sorted((float(t), kind == "start") for kind, t in
                    (line.split() for line in log.read_text().splitlines()))
    at_once = most = 0
    for _, start in events:  # at equal times an end sorts first: no false overlap
        at_once += 1 if start else -1
        most = max(most, at_once)
    return most


@pytest.mark.slow
def test_fallbacks_run_at_most_local_jobs_at_a_time(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "tests" / "ninja"))
    from small_project import save_tiny_model

    save_tiny_model(tmp_path / "tiny.onnx")
    launcher = _launcher(tmp_path)
    (tmp_path / "BUILD.yaml").write_text(textwrap.dedent(f"""\
        buildgen: 1
        targets:
          t: {{kind: c, compiler_launcher: [{launcher}]}}
        models:
          tiny: {{source: tiny.onnx, inputs: {{x: [2, 4]}}, targets: [t]}}
        remote: {{executor: "grpc://127.0.0.1:9", jobs: 6}}
    """))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")}
    env["BUILDGEN_PREBUILT"] = "off"  # as tests/conftest.py says
    env.update(PYTHONPATH=str(REPO), BUILDGEN_CACHE_DIR=str(tmp_path / "cache"),
               BUILDGEN_REMOTE_LOCAL_JOBS="2")
    done = subprocess.run([sys.executable, "-m", "buildgen", "build"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "locally after the executor failed" in done.stdout
    log = tmp_path / "compiles.log"
    assert len(log.read_text().splitlines()) >= 2 * 8  # the compiles of the model and kernels
    assert _most_at_once(log) == 2
