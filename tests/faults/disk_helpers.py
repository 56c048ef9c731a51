"""Helpers of tests/faults/test_disk_*.py: real builds on a full or failing disk.

A trial builds a one-model project (the `c` target, one ISA level: cheap compiles) with
`python -m buildgen build` while a disk fault is in force, then again without it, and once
more to see that nothing runs. `Trials` counts how each went and collects wrong outcomes:

- a build that fails, but not with exit status 1, or with a traceback, or with an error
  that names neither the failing action (ninja's `FAILED:` line) nor the file;
- a build that succeeds with outputs other than the reference build's bytes;
- a build after the fault is gone that fails, or trusts a half-written output (its bytes
  then differ from the reference), or a following build that runs anything.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "ninja"))
from small_project import save_tiny_model  # noqa: E402

MODEL = "tiny"
PAGE = 4096
ENV_TRIALS = "BUILDGEN_FAULT_TRIALS"  # raises every test's trial count (a soak)
MANIFEST = f"""buildgen: 1
targets:
  cpu: {{kind: c, opt_level: 1, isa_levels: [x86-64]}}
models:
  {MODEL}:
    source: models/{MODEL}.onnx
    inputs: {{x: [2, 4]}}
    targets: [cpu]
"""


def trial_count(default: int) -> int:
    """`default`, or BUILDGEN_FAULT_TRIALS when that is larger."""
    raised = os.environ.get(ENV_TRIALS, "").strip()
    return max(default, int(raised)) if raised else default


# -- the project ----------------------------------------------------------------------------


def save_model(path: Path) -> None:
    """relu(x @ w + b), x: [n, 4], with fixed random weights."""
    save_tiny_model(path, hidden=8)


def write_project(root: Path, model: Path | None = None) -> Path:
    """root/BUILD.yaml and its model (copied from `model` when given); returns root."""
    target = root / "models" / f"{MODEL}.onnx"
    if model is None:
        save_model(target)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(model, target)
    (root / "BUILD.yaml").write_text(MANIFEST)
    return root


def products(build: Path) -> dict[str, bytes]:
    """Every file the build made for the model (stage outputs, sources, objects,
    libraries, header, report), by path relative to the build folder."""
    return {
        str(path.relative_to(build)): path.read_bytes()
        for path in sorted((build / MODEL).rglob("*"))
        if path.is_file()
    }


def pages_used(folder: Path) -> int:
    """What the files under `folder` take on a tmpfs, in pages."""
    return sum(math.ceil(p.stat().st_size / PAGE) for p in folder.rglob("*") if p.is_file())


# -- running builds -------------------------------------------------------------------------


@dataclass
class Build:
    code: int
    output: str  # stdout and stderr together
    seconds: float


class Builder:
    """`python -m buildgen build` with a private worker folder (its workers are stopped by
    `stop_workers`) and the cache folder given per build."""

    def __init__(self, workers: Path, **extra: str):
        self.workers = workers
        self.extra = extra

    def env(self, cache: Path, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("BUILDGEN_", "BGFAULT_")) and k != "LD_PRELOAD"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        env["BUILDGEN_CACHE_DIR"] = str(cache)
        env["BUILDGEN_WORKER_DIR"] = str(self.workers)
        env["BUILDGEN_WORKER_IDLE"] = "120"
        env.update(self.extra)
        env.update(extra)
        return env

    def build(self, project: Path, cache: Path, **extra: str) -> Build:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "buildgen", "build"], cwd=project,
            env=self.env(cache, **extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, errors="replace", timeout=600, check=False,
        )  # fmt: skip
        return Build(done.returncode, done.stdout, time.monotonic() - started)

    def stop_workers(self, below: Path | None = None) -> None:
        """SIGTERM this builder's workers (those serving from its folder), or only those
        whose working directory is under `below` (they hold a mount busy)."""
        for pid in _pids():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if b"buildgen.worker.server" not in argv or str(self.workers).encode() not in argv:
                continue
            if below is not None and not (cwd + "/").startswith(f"{below}/"):
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


# -- tmpfs ----------------------------------------------------------------------------------


def _mount_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)


def require_tmpfs(scratch: Path) -> None:
    """Skip (saying why) where a tmpfs cannot be mounted: not root, no mount, a sandbox."""
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        done = _mount_command("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(scratch))
    except OSError as exc:
        pytest.skip(f"cannot run mount: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({(done.stderr or done.stdout).strip()})")
    unmount(scratch)


def remount(folder: Path, kib: int) -> None:
    done = _mount_command("-o", f"remount,size={kib}k", str(folder))
    assert done.returncode == 0, done.stderr


def unmount(folder: Path, builder: Builder | None = None) -> None:
    """Unmount; a worker of ours whose working directory is on it is stopped first (a
    worker keeps the folder of the build that started it: see the report of that bug)."""
    for attempt in range(20):
        done = subprocess.run(["umount", str(folder)], capture_output=True, text=True,
                              check=False)
        if done.returncode == 0:
            return
        if builder is not None and attempt == 0:
            builder.stop_workers(below=folder)
        time.sleep(0.25)
    subprocess.run(["umount", "-l", str(folder)], check=False)


@contextlib.contextmanager
def tmpfs(folder: Path, kib: int, builder: Builder | None = None) -> Iterator[Path]:
    """A tmpfs of `kib` KiB mounted on `folder` (created) for the block; always unmounted."""
    folder.mkdir(parents=True, exist_ok=True)
    done = _mount_command("-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(folder))
    assert done.returncode == 0, done.stderr
    try:
        yield folder
    finally:
        unmount(folder, builder)


# -- judging outcomes ----------------------------------------------------------------------

FAILED_ACTION = re.compile(r"^FAILED: (?:\[code=\d+\] )?(\S+)", re.M)


def failed_actions(output: str) -> list[str]:
    """The first output of every action ninja reported as failed."""
    return FAILED_ACTION.findall(output)


def unclear_failure(build: Build, cause: str, build_dir: Path) -> str | None:
    """Why the failed `build` is a wrong outcome, or None when it failed as it should: exit
    status 1, no traceback, no claim of a bug, and the failing action named (ninja's
    FAILED: line, with the tool's message) or else the cause said (`cause`: the strerror
    text) with the file named."""
    if build.code != 1:
        return f"exit status {build.code}"
    if "Traceback (most recent call last)" in build.output:
        return "a traceback"
    if "internal error" in build.output:
        return "reported as a bug in buildgen"
    if failed_actions(build.output):
        # The action is named and its tool's message shown, in the tool's words: binutils
        # say "No space left on device" for any short write (bfdio.c sets errno ENOSPC).
        return None
    if cause not in build.output:
        return f"the cause ({cause}) is not said"
    lines = [line for line in build.output.splitlines() if cause in line]
    if any(str(build_dir) in line or "log" in line for line in lines):
        return None  # gen's files, the stamp, ninja's build or deps log: named
    return "neither the action nor the file is named"


def where_failed(build: Build) -> str:
    """A short name for where the build stopped: the first failed action's output, or the
    file gen or ninja named."""
    actions = failed_actions(build.output)
    if actions:
        return actions[0].split("/")[-1]
    if "build log" in build.output or "deps log" in build.output:
        return "ninja's log"
    if "cannot write" in build.output:
        return "gen"
    return "other"


@dataclass
class Trials:
    """Counts of what the trials did, and every wrong outcome with its trial's story."""

    name: str
    counts: Counter[str] = field(default_factory=Counter)
    stops: Counter[str] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def bad(self, trial: str, problem: str, build: Build | None = None) -> None:
        tail = "\n".join(build.output.splitlines()[-25:]) if build else ""
        self.wrong.append(f"{trial}: {problem}\n{tail}")

    def report(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        stops = ", ".join(f"{k} {v}" for k, v in self.stops.most_common())
        return (f"{self.name}: {counts}; stopped at: {stops or '-'}; "
                f"{len(self.wrong)} wrong outcomes; {time.monotonic() - self.started:.1f} s")

    def check(self) -> None:
        print(self.report())
        assert not self.wrong, "\n\n".join(self.wrong)


@contextlib.contextmanager
def stop_workers_after(builder: Builder) -> Iterator[Builder]:
    """The builder for the block; its workers are stopped after it."""
    try:
        yield builder
    finally:
        builder.stop_workers()


class Reference:
    """The project built once, with no fault, in a roomy folder, with a cache of its own
    (`cache`, then warm); `extra`: environment of that build."""

    def __init__(self, root: Path, builder: Builder, **extra: str):
        self.root = root
        self.builder = builder
        self.project = write_project(root / "reference")
        self.model = self.project / "models" / "tiny.onnx"
        self.cache = root / "warm-cache"  # filled by the reference build
        built = builder.build(self.project, self.cache, **extra)
        assert built.code == 0, built.output
        self.build_dir = self.project / "build"
        self.products = products(self.build_dir)
        self.build_pages = pages_used(self.build_dir)
        self.cache_pages = pages_used(self.cache)


# -- checks of one trial -----------------------------------------------------------------


def same_bytes(got: dict[str, bytes], expected: dict[str, bytes]) -> str | None:
    """None when equal, else which files differ."""
    if got == expected:
        return None
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    differ = sorted(p for p in set(got) & set(expected) if got[p] != expected[p])
    return f"missing {missing}, extra {extra}, different {differ}"


def check_rebuild(trials: Trials, trial: str, ref: Reference, project: Path,
                  cache: Path) -> None:
    """Build with the fault gone: success with the reference bytes, then a no-op."""
    again = ref.builder.build(project, cache)
    if again.code != 0:
        trials.bad(trial, "the build after the fault failed", again)
        return
    if problem := same_bytes(products(project / "build"), ref.products):
        trials.bad(trial, f"the build after the fault has wrong outputs: {problem}", again)
        return
    trials.counts["rebuilt right"] += 1
    noop = ref.builder.build(project, cache)
    if noop.code != 0 or "ninja: no work to do." not in noop.output:
        trials.bad(trial, "the build after that was no no-op", noop)


def judge_failure(trials: Trials, trial: str, build: Build, ref: Reference, project: Path,
                  cause: str) -> None:
    if build.code == 0:
        if problem := same_bytes(products(project / "build"), ref.products):
            trials.bad(trial, f"succeeded with wrong outputs: {problem}", build)
        else:
            trials.counts["fit"] += 1
        return
    if problem := unclear_failure(build, cause, project / "build"):
        trials.bad(trial, f"failed unclearly: {problem}", build)
    else:
        trials.counts["failed clearly"] += 1
        trials.stops[where_failed(build)] += 1


def cache_damage(cache: Path) -> list[str]:
    """Blobs whose bytes do not hash to their name, entries that are no JSON, temp files."""
    damaged = []
    for path in sorted(cache.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(cache)
        if path.name.endswith(".tmp"):
            damaged.append(f"{rel} (a temp file left behind)")
        elif rel.parts[0] == "cas" and hashlib.sha256(path.read_bytes()).hexdigest() != path.name:
            damaged.append(f"{rel} (bytes do not match the name)")
        elif rel.parts[0] == "ac":
            try:
                json.loads(path.read_bytes())
            except ValueError:
                damaged.append(f"{rel} (no JSON)")
    return damaged


def restored(build_dir: Path, offset: int = 0) -> int:
    journal = build_dir / ".buildgen" / "actions.jsonl"
    lines = journal.read_text().splitlines()[offset:]
    return sum(json.loads(line)["outcome"] == "local" for line in lines)


def built_beside_faulty_cache(trials: Trials, trial: str, build: Build, ref: Reference,
                              project: Path, what: str) -> bool:
    """A build beside a faulty (`what`: full, failing) cache succeeded with the reference
    bytes, as a cache only ever costs hits; False, with the trial marked bad, if not."""
    if build.code != 0 or "Traceback" in build.output:
        trials.bad(trial, f"a {what} cache failed the build", build)
        return False
    if problem := same_bytes(products(project / "build"), ref.products):
        trials.bad(trial, f"wrong outputs beside a {what} cache: {problem}", build)
        return False
    trials.counts["built right"] += 1
    trials.counts["warnings"] += build.output.count("buildgen cache:")
    return True


def check_cache_restores(trials: Trials, trial: str, ref: Reference, cache: Path,
                         fresh: Path) -> None:
    """After the fault: the cache holds no damaged file, and a fresh copy of the project
    (`fresh`) built with it restores what it kept and matches the reference."""
    for problem in cache_damage(cache):
        trials.bad(trial, f"damaged cache file {problem}")
    check_rebuild(trials, trial, ref, fresh, cache)
    trials.counts["restored actions"] += restored(fresh / "build")

