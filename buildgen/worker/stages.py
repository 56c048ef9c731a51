"""In a worker: run a `python -m buildgen.stages ...` command in a fork, not a new interpreter.

The forked child starts with everything imported and runs the very function the command
would (buildgen.stages.runner.main), with its stdout and stderr where the command's would
go: the wrapper's pipes when it captures them, else the action's own. A command that
would start anything else (another interpreter, other PYTHONPATH, other environment
assignments) is left to run as a process.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence

from buildgen.cache.command import wait_for

_MODULE = ("-m", "buildgen.stages")


def stage_arguments(command: Sequence[str]) -> list[str] | None:
    """The stage's arguments when `command` runs a stage in this very interpreter, else None."""
    words = list(command)
    if words[:1] == ["env"]:
        words.pop(0)
        while words and "=" in words[0] and not words[0].startswith("/"):
            name, _, value = words.pop(0).partition("=")
            if name != "PYTHONPATH" or value != os.environ.get("PYTHONPATH", ""):
                return None
    if len(words) < 3 or tuple(words[1:3]) != _MODULE:
        return None
    found = shutil.which(words[0])
    if found is None or os.path.realpath(found) != os.path.realpath(sys.executable):
        return None
    return words[3:]


def run_stage_in_fork(
    command: Sequence[str], capture: bool
) -> tuple[int, bytes, bytes] | None:
    """(exit status, stdout, stderr) — the last two empty unless `capture` — or None when
    `command` is not a stage this process can run."""
    argv = stage_arguments(command)
    if argv is None:
        return None
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        code = run_in_fork(argv, (out.fileno(), err.fileno()) if capture else None)
        if not capture:
            return code, b"", b""
        out.seek(0)
        err.seek(0)
        return code, out.read(), err.read()


def run_in_fork(argv: list[str], streams: tuple[int, int] | None = None) -> int:
    """The exit status of `python -m buildgen.stages *argv` run in a fork of this process
    (negative: the signal that ended it), its stdout and stderr to `streams` when given."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        if streams is not None:
            os.dup2(streams[0], 1)
            os.dup2(streams[1], 2)
        os._exit(run_stage(argv))
    return os.waitstatus_to_exitcode(wait_for(pid))


def run_stage(argv: list[str]) -> int:
    """What `python -m buildgen.stages *argv` would do, in this process."""
    from buildgen.stages.runner import main

    return run_main(main, "python -m buildgen.stages", argv)


def run_main(main: Callable[[list[str]], int], program: str, argv: list[str]) -> int:
    """`main(argv)` as a program's exit status, its output flushed: SystemExit, an
    interrupt and a stray exception end it as they would end the program."""
    sys.argv = [program, *argv]
    code = 1
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code & 0xFF
