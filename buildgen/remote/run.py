"""The wrapper's entry to remote execution: run an action remotely, or say it must run here.

A remote failure never fails the build. A transient one (the service briefly unavailable, a
blob that failed its check) is retried with backoff; after that, or after a refusal or the
action's timeout on the worker, the action runs locally and the build summary says which
and why. A blob that failed its check is fetched again from a fresh execution (the action
cache's entry is skipped), never trusted. When the service cannot be reached at all, the
first action to find out writes a marker, and every later action of the build runs locally
at once instead of waiting for its own retries.

The actions of a build are separate processes: the marker and one event file per fallback
under `<build>/.buildgen/remote/` (written atomically) are what they share, as the remote
cache's client's are (buildgen.cache.shared_state).
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.cache.action import ActionSpec
from buildgen.cache.shared_state import SharedState, printable
from buildgen.remote.settings import ExecutorSettings

if TYPE_CHECKING:
    from buildgen.remote.action import RemoteRun

DOWN_MARKER = "executor-down"
EVENTS_DIR = "executor-events"
ATTEMPTS = 3
BACKOFF = 0.5  # s before the second attempt, doubled after each


def run_remotely(spec: ActionSpec, settings: ExecutorSettings, build: Path,
                 state_dir: Path, environ: dict[str, str]) -> RemoteRun | None:
    """The action's outcome on a worker (its outputs written), or None: run it locally
    (the executor failed: the summary says so). Raises LocalOnly for an action that cannot
    be sent at all."""
    if executor_down(state_dir):
        return None
    from buildgen.remote.action import execute
    from buildgen.remote.client import RemoteError

    delay = BACKOFF
    skip_cache = False
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return execute(spec, settings, str(build), environ, skip_cache=skip_cache)
        except RemoteError as exc:
            if exc.transient and attempt < ATTEMPTS:
                skip_cache = skip_cache or exc.corrupt
                time.sleep(delay)
                delay *= 2
                continue
            _fall_back(spec, settings, state_dir, str(exc), attempt, exc.unreachable)
            return None
        except OSError as exc:  # an input vanished, or the build dir cannot be written
            _fall_back(spec, settings, state_dir, f"{exc.strerror or exc}", attempt, False)
            return None
    return None  # not reached: the last attempt returns


def executor_state(state_dir: Path) -> SharedState:
    return SharedState(state_dir, DOWN_MARKER, EVENTS_DIR)


def executor_down(state_dir: Path) -> bool:
    return executor_state(state_dir).is_down()


def executor_warnings(state_dir: Path) -> list[str]:
    """The build summary's lines: the service down (once), then each fallback, sorted."""
    state = executor_state(state_dir)
    text = state.marker_text()
    return ([printable(text, 400)] if text is not None else []) + state.event_lines()


def reset_executor_state(state_dir: Path) -> None:
    """Forget the previous build's marker and fallbacks; called at the start of a build."""
    executor_state(state_dir).reset()


def _fall_back(spec: ActionSpec, settings: ExecutorSettings, state_dir: Path, reason: str,
               attempts: int, unreachable: bool) -> None:
    reason = printable(reason, 300)
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    output = spec.outputs[0]
    line = f"{output}: ran locally, the executor failed{tries} ({reason})"
    with contextlib.suppress(OSError, ValueError):
        print(f"buildgen remote: warning: {line}", file=sys.stderr, flush=True)
    state = executor_state(state_dir)
    state.record(f"fallback-{hashlib.sha256(output.encode()).hexdigest()[:16]}", line)
    if unreachable:
        state.mark_down(f"executor {printable(settings.url)} was unreachable ({reason}): "
                        "the rest of the build ran locally\n")
