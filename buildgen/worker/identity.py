"""Which worker may run an action: a digest of the interpreter and of buildgen's files.

gen computes it for the interpreter build.ninja names and writes it on every cached
action's command line; a worker recomputes it for itself when it starts and serves only
that identity. Editing buildgen (or switching interpreter, venv or PYTHONPATH) changes it,
so a worker holding old code in memory is never asked again: clients go to a new socket,
and the old worker exits when idle. The files are also gen's inputs (ninja/context.py), so
ninja regenerates build.ninja, with the new identity, before running anything.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from buildgen.resources import buildgen_files

DIGITS = 32  # hex digits: a short socket name (sun_path holds 108 bytes)


def worker_identity(interpreter: str, pythonpath: str) -> str:
    """For actions started as `interpreter` with PYTHONPATH=`pythonpath` (this process's
    interpreter: a worker runs the code this process would import)."""
    package = Path(__file__).resolve().parent.parent
    # The package's folder too: two checkouts of one commit are two workers, each loading
    # its own files (paths a stage derives from buildgen's location stay its own).
    digest = hashlib.sha256(
        "\0".join((sys.version, interpreter, sys.prefix, pythonpath, str(package))).encode()
    )
    for path in buildgen_files():
        name = os.path.relpath(path, package.parent)
        digest.update(b"\0" + name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:DIGITS]


def canonical_interpreter(path: str) -> str:
    """`path` with the symlinks that stay in its folder followed: `python` and `python3` are
    usually links to `python3.11` beside them, and build.ninja (so every action's command)
    must not depend on which name started gen. Links out of the folder are kept: a venv's
    `bin/python3` points at the base interpreter, but only the venv's path finds the venv."""
    path = os.path.abspath(path)
    for _ in range(8):  # a bounded walk: a link loop ends here, not in a hang
        try:
            target = os.readlink(path)
        except OSError:
            break
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
        if os.path.dirname(resolved) != os.path.dirname(path) or not os.path.isfile(resolved):
            break
        path = resolved
    return path
