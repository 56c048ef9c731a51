"""Running an action's command as ninja would have: what the cache wrapper does on a miss
(buildgen/cache/exec.py), and without a cache."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from buildgen.cache.action import ActionSpec
from buildgen.cache.elf_check import remove_incomplete
from buildgen.cache.environ import environ_data
from buildgen.cache.model import ARCHIVE_RULE, ARCHIVE_STAGING

# Set in a stage worker (buildgen/worker/stages.py): runs a Python stage's command in a fork
# of the warm worker and returns (status, stdout, stderr), or None for any other command.
stage_runner: Callable[[Sequence[str], bool], tuple[int, bytes, bytes] | None] | None = None


@dataclass(frozen=True)
class Ran:
    code: int
    console: tuple[bytes, bytes] = (b"", b"")  # stdout, stderr, when captured


def run_command(spec: ActionSpec, capture: bool = False) -> Ran:
    """Run the command as ninja would have. Without restat the outputs are removed first:
    a tool that appends (ar) starts clean, and a failure leaves no stale output behind.
    With `capture` what it prints is passed on and also returned, to be cached."""
    return start_command(spec, capture).finish()


def start_command(spec: ActionSpec, capture: bool = False) -> Running:
    """The command started as run_command runs it; `finish()` waits for it. A Python stage
    the worker runs (stage_runner) and a command that cannot start are over already."""
    if not spec.restat:
        for path in spec.outputs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    if stage_runner is not None and (ran := stage_runner(spec.command, capture)) is not None:
        code, stdout, stderr = ran
        return Running(spec, capture, ended=Ran(code, (stdout, stderr)))
    staged = ArchiveStaging.of(spec)
    streams = [_scratch_file("stdout"), _scratch_file("stderr")] if capture else []
    try:
        pid = _spawn(staged.command if staged else spec.command,
                     [(os.POSIX_SPAWN_DUP2, fd, number) for number, fd in enumerate(streams, 1)])
    except OSError as exc:
        _close(streams)
        print(f"error: {spec.command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return Running(spec, capture, ended=Ran(127))
    return Running(spec, capture, pid, streams, staged)


class Running:
    """A command start_command started. `finish()` waits for it and returns what
    run_command would; `stop()` ends it unfinished, for a result that came from the cache
    while it ran (buildgen/cache/exec.py starts a compile before its lookup)."""

    def __init__(self, spec: ActionSpec, capture: bool, pid: int | None = None,
                 streams: Sequence[int] = (), staged: ArchiveStaging | None = None,
                 ended: Ran | None = None):
        self.spec = spec
        self.capture = capture
        self._pid = pid
        self._streams = list(streams)
        self._staged = staged
        self._ended = ended
        self.stopped = False

    def finish(self) -> Ran:
        if self._ended is None:
            self._ended = self._wait()
        if self.capture:
            echo(*self._ended.console)
        return self._ended

    def _wait(self) -> Ran:
        pid, self._pid = self._pid, None  # reaped below, even when interrupted: not stopped
        assert pid is not None
        try:
            status = os.waitstatus_to_exitcode(wait_for(pid))
            console = tuple(os.pread(fd, os.fstat(fd).st_size, 0) for fd in self._streams)
        finally:
            _close(self._streams)
        if self._staged and status == 0:
            self._staged.commit()
        elif self._staged:
            ArchiveStaging.clear(self.spec)
        # An ELF output cut short (a linker silent at a full disk) fails the action, removed.
        code = status or remove_incomplete(self.spec.outputs, self.spec.command[0])
        return Ran(code, (console[0], console[1]) if self.capture else (b"", b""))

    def stop(self) -> None:
        """End the command and wait for it: SIGTERM to this process's group, which this
        process ignores meanwhile. Only where the group holds nothing but this process and
        what it started: a worker's runner, which takes a group of its own for each action
        (buildgen/worker/runner.py)."""
        if self._pid is None or self._ended is not None:
            return
        previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            os.killpg(os.getpgrp(), signal.SIGTERM)
        finally:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
        try:
            wait_for(self._pid)
        finally:
            self._pid = None
            _close(self._streams)
        self._ended = Ran(-int(signal.SIGTERM))
        self.stopped = True


def _spawn(command: Sequence[str], actions: list[tuple[int, int, int]]) -> int:
    """Start `command`, found on PATH, in this folder and environment: its pid.

    posix_spawn rather than subprocess.run: with pipes to drain, subprocess.run cost 0.5 ms
    more per compile (40 alternated runs of a tiny model's model.c, 2 cores), a sixth of the
    whole wrapper's cost on a miss; what a command prints goes to memfds instead. The child
    gets what subprocess gives it: SIGPIPE and SIGXFSZ at their defaults, no descriptors
    but 0-2 (Python opens every other one non-inheritable)."""
    # The environment as bytes: given os.environ, posix_spawn would decode and encode
    # again each variable (35 us of a 110 us spawn, 42 variables).
    environment = environ_data()
    return os.posix_spawnp(command[0], list(command),
                           os.environ if environment is None else environment,
                           file_actions=actions, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))


def _close(fds: list[int]) -> None:
    while fds:
        os.close(fds.pop())


def _scratch_file(name: str) -> int:
    if hasattr(os, "memfd_create"):
        return os.memfd_create(name, os.MFD_CLOEXEC)
    return os.dup(tempfile.TemporaryFile().fileno())


def wait_for(pid: int) -> int:
    """A child's wait status. An interrupt reaches it too (it is in the action's process
    group): let it finish, then pass the interrupt on."""
    try:
        return os.waitpid(pid, 0)[1]
    except KeyboardInterrupt:
        os.waitpid(pid, 0)
        raise


@dataclass(frozen=True)
class ArchiveStaging:
    """`ar` writes its temp file beside the archive, and a kill leaves it there for good:
    the archive is written in a folder of its own (removed whole by the next run), then
    moved into place, as the rule does with the cache off (buildgen/ninja/rules.py)."""

    folder: str
    output: str
    command: tuple[str, ...]

    @staticmethod
    def of(spec: ActionSpec) -> ArchiveStaging | None:
        if spec.rule != ARCHIVE_RULE or len(spec.outputs) != 1:
            return None
        output = spec.outputs[0]
        if output not in spec.command:
            return None
        folder = ArchiveStaging.clear(spec)
        os.mkdir(folder)
        staged = os.path.join(folder, "a")
        command = tuple(staged if word == output else word for word in spec.command)
        return ArchiveStaging(folder, output, command)

    def commit(self) -> None:
        os.replace(os.path.join(self.folder, "a"), self.output)
        os.rmdir(self.folder)

    @staticmethod
    def clear(spec: ActionSpec) -> str:
        """Remove what a killed or failed archive left (also before a restore from the
        cache, which runs no ar); the staging folder's path."""
        if spec.rule != ARCHIVE_RULE or not spec.outputs:
            return ""
        folder = spec.outputs[0] + ARCHIVE_STAGING
        shutil.rmtree(folder, ignore_errors=True)
        return folder


def echo(stdout: bytes, stderr: bytes) -> None:
    for stream, data in ((sys.stdout, stdout), (sys.stderr, stderr)):
        if data:
            stream.flush()
            stream.buffer.write(data)
            stream.buffer.flush()
