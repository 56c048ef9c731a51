"""Running an action's command as ninja would have: what the cache wrapper does on a miss
(buildgen/cache/exec.py), and without a cache."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
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
        done = subprocess.run(staged.command if staged else spec.command, check=False,
                              capture_output=capture)
    except OSError as exc:
        print(f"error: {spec.command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return Ran(127)
    if staged and done.returncode == 0:
        staged.commit()
    elif staged:
        ArchiveStaging.clear(spec)
    # An ELF output cut short (a linker silent at a full disk) fails the action, removed.
    code = done.returncode or remove_incomplete(spec.outputs, spec.command[0])
    if not capture:
        return Ran(code)
    echo(done.stdout, done.stderr)
    return Ran(code, (done.stdout, done.stderr))


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
