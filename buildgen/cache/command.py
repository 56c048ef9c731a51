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
    if not spec.restat:
        for path in spec.outputs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    if stage_runner is not None and (ran := stage_runner(spec.command, capture)) is not None:
        code, stdout, stderr = ran
        if capture:
            echo(stdout, stderr)
        return Ran(code, (stdout, stderr))
    staged = ArchiveStaging.of(spec)
    try:
        status, stdout, stderr = spawn(staged.command if staged else spec.command, capture)
    except OSError as exc:
        print(f"error: {spec.command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return Ran(127)
    if staged and status == 0:
        staged.commit()
    elif staged:
        ArchiveStaging.clear(spec)
    # An ELF output cut short (a linker silent at a full disk) fails the action, removed.
    code = status or remove_incomplete(spec.outputs, spec.command[0])
    if not capture:
        return Ran(code)
    echo(stdout, stderr)
    return Ran(code, (stdout, stderr))


def spawn(command: Sequence[str], capture: bool) -> tuple[int, bytes, bytes]:
    """(exit status, negative for a signal; stdout; stderr) of `command`, found on PATH
    and run in this folder and environment; what it prints goes to files when captured.

    posix_spawn rather than subprocess.run: with pipes to drain, subprocess.run cost 0.5 ms
    more per compile (40 alternated runs of a tiny model's model.c, 2 cores), a sixth of the
    whole wrapper's cost on a miss. The child gets what subprocess gives it: SIGPIPE and
    SIGXFSZ at their defaults, no descriptors but 0-2 (Python opens every other one
    non-inheritable)."""
    if not capture:
        return os.waitstatus_to_exitcode(wait_for(_spawn(command, []))), b"", b""
    streams = [_scratch_file("stdout"), _scratch_file("stderr")]
    try:
        pid = _spawn(command, [(os.POSIX_SPAWN_DUP2, fd, number)
                               for number, fd in enumerate(streams, start=1)])
        status = os.waitstatus_to_exitcode(wait_for(pid))
        stdout, stderr = (os.pread(fd, os.fstat(fd).st_size, 0) for fd in streams)
    finally:
        for fd in streams:
            os.close(fd)
    return status, stdout, stderr


def _spawn(command: Sequence[str], actions: list[tuple[int, int, int]]) -> int:
    return os.posix_spawnp(command[0], list(command), os.environ, file_actions=actions,
                           setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))


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
