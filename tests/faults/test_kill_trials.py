"""kill -9 trials: a build killed at a random moment, then built again, gives the same bytes.

Each trial starts `python -m buildgen build` of a clean build dir (two tiny models, one
cheap `c` target) in a session of its own, waits a random delay (a seeded RNG, spread over
the duration of a clean build, measured first), then SIGKILLs every process of that
session and every process group in it — ninja runs each action in a group of its own, so
this is what a CI timeout that kills the job's process tree does, not just ninja. With the
workers on, the actions run in a worker's forked children (another session): the test
notes their groups before the kill and waits for them to be gone, as the worker promises
(a straggler that outlives the build would write after the restart). Then:

1. the build is run again to completion: it must succeed and every product (libraries,
   headers, sources, objects, reports, stage outputs) must be byte-identical to a
   reference build of the same project;
2. a third build, with `-d explain`, must be a no-op: `ninja: no work to do.`, no
   "stored deps info out of date", no action re-run.

The trials run with the action cache on (a cache folder of the test, kept across its
trials but emptied before every other trial, so kills land both in cold builds that store
and in warm ones that restore) and off (`BUILDGEN_CACHE=off`), and with the persistent
workers on and off (`BUILDGEN_WORKERS=off`). Every trial is counted, every wrong outcome
too, and the counts and timings are printed (`pytest -s` shows them).

BUILDGEN_FAULT_TRIALS=<n> sets the trials per configuration (default 2, which keeps this
file near 3 minutes on a 2-core machine); raise it for a soak, e.g.
`BUILDGEN_FAULT_TRIALS=50 PYTHONPATH=. python -m pytest tests/faults -s`.
BUILDGEN_FAULT_SEED=<n> changes the seed (default 20261126).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fault_helpers import (
    build_argv,
    buildgen_sources_mtime,
    compare,
    environment,
    kill_session,
    products,
    run_build,
    start_worker,
    wait_groups_gone,
    worker_action_groups,
    worker_folder,
    write_project,
)

TRIALS = int(os.environ.get("BUILDGEN_FAULT_TRIALS", "2"))
SEED = int(os.environ.get("BUILDGEN_FAULT_SEED", "20261126"))
MODELS = (8, 5)  # hidden sizes of the project's two models
STRAGGLER_WAIT_S = 15.0  # how long a worker's action may take to die after its client


@dataclass
class Reference:
    products: dict[str, bytes]
    seconds: float  # a clean build, cache and workers off


@dataclass
class Tally:
    trials: int = 0
    killed: int = 0  # trials where the kill landed while the build ran
    processes_killed: int = 0
    worker_actions_at_kill: int = 0
    wrong: list[str] = field(default_factory=list)
    disturbed: int = 0  # buildgen's own files were edited during the trial: not counted
    leftovers: int = 0  # temp files and unread depfiles a kill left in the build dir


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    root = tmp_path_factory.mktemp("kill-reference")
    project = write_project(root / "p", MODELS)
    env = environment(root / "cache", root / "workers", cache=False, workers=False)
    started = time.monotonic()
    done = run_build(project, env)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    found = products(project / "build")
    assert any(name.endswith(".so") for name in found) and any(
        name.endswith(".h") for name in found), sorted(found)
    print(f"\nkill trials: reference build {seconds:.1f} s, {len(found)} products")
    return Reference(found, seconds)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [True, False], ids=["workers", "no-workers"])
@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_a_build_killed_at_any_moment_rebuilds_to_the_same_bytes(
    tmp_path: Path, reference: Reference, cache: bool, workers: bool
) -> None:
    rng = random.Random(f"{SEED}-{cache}-{workers}")
    project = write_project(tmp_path / "p", MODELS)
    build = project / "build"
    cache_dir = tmp_path / "cache"
    tally = Tally()
    started = time.monotonic()
    with worker_folder() as worker_dir:
        env = environment(cache_dir, worker_dir, cache=cache, workers=workers)
        if workers:
            start_worker(project, env)
            shutil.rmtree(build)
        # This configuration's own clean build times (cold, and warm: all restored), the
        # spans the kills are spread over (to 90%: a build's time varies); both builds are
        # checked like the trials.
        # The reference build is this configuration's clean build already.
        spans = [reference.seconds if not (cache or workers) else
                 _timed_build(project, env, reference, tally, "cold build")]
        if cache:
            spans.append(_timed_build(project, env, reference, tally, "warm build"))
        for trial in range(TRIALS):
            cold = not cache or trial % 2 == 0
            if cache and cold:
                shutil.rmtree(cache_dir, ignore_errors=True)  # kills while storing
            _trial(trial, rng.uniform(0.03, 0.9) * spans[0 if cold else 1], project, env,
                   reference, tally)
            shutil.rmtree(build, ignore_errors=True)
    elapsed = time.monotonic() - started
    config = f"cache {'on' if cache else 'off'}, workers {'on' if workers else 'off'}"
    print(f"\nkill trials ({config}): clean builds {' / '.join(f'{x:.1f}' for x in spans)} s; "
          f"{tally.trials} trials, {tally.killed} killed mid-build "
          f"({tally.processes_killed} processes SIGKILLed, {tally.worker_actions_at_kill} "
          f"worker actions in flight), {len(tally.wrong)} wrong outcomes, "
          f"{tally.disturbed} disturbed by edits of buildgen, {tally.leftovers} leftover "
          f"files; {elapsed:.1f} s")
    assert tally.trials == TRIALS
    assert not tally.wrong, "\n".join(tally.wrong)


def _timed_build(project: Path, env: dict[str, str], reference: Reference, tally: Tally,
                 what: str) -> float:
    shutil.rmtree(project / "build", ignore_errors=True)
    started = time.monotonic()
    done = run_build(project, env)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    result = compare(project / "build", reference.products)
    if result.wrong:
        tally.wrong.append(f"{what} (no kill): products differ from the reference: {result}")
    shutil.rmtree(project / "build")
    return seconds


def _trial(trial: int, delay: float, project: Path, env: dict[str, str],
           reference: Reference, tally: Tally) -> None:
    tally.trials += 1
    sources_before = buildgen_sources_mtime()
    worker_dir = Path(env["BUILDGEN_WORKER_DIR"])
    running = subprocess.Popen(build_argv(), cwd=project, env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        running.wait(timeout=delay)
        finished_first = True
    except subprocess.TimeoutExpired:
        finished_first = False
    if not finished_first:
        tally.killed += 1
        in_worker = worker_action_groups(worker_dir)
        tally.processes_killed += kill_session(running.pid)
        running.wait()
        in_worker |= worker_action_groups(worker_dir)  # forked while the kill went on
        tally.worker_actions_at_kill += len(in_worker)
        left = wait_groups_gone(in_worker, STRAGGLER_WAIT_S)
        if left:
            tally.wrong.append(f"trial {trial}: worker actions outlived the killed build: "
                               f"{left}")
            for p in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
    what = f"trial {trial} (killed after {delay:.2f} s)" if not finished_first else (
        f"trial {trial} (finished within {delay:.2f} s)")

    again = run_build(project, env)
    noop = run_build(project, env, "--", "-d", "explain")
    if buildgen_sources_mtime() != sources_before:
        tally.disturbed += 1
        return
    if again.returncode != 0:
        tally.wrong.append(f"{what}: the build after the kill failed:\n"
                           f"{again.stdout}{again.stderr}")
        return
    result = compare(project / "build", reference.products)
    tally.leftovers += len(result.leftovers)
    if result.wrong:
        tally.wrong.append(f"{what}: products differ from the reference: {result}")
    text = noop.stdout + noop.stderr
    if (noop.returncode != 0 or "ninja: no work to do." not in text
            or "stored deps info out of date" in text or "ninja explain:" in text):
        tally.wrong.append(f"{what}: the third build was not a no-op:\n{text}")
