"""What the planner needs to know about this installation and where things are.

Everything here is decided once, at gen time ("options belong in the generator"), and
handed to the planner as plain values so tests can plan with fixed ones.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

import buildgen
from buildgen.resources import buildgen_files, include_dir, rules_dir, schemas_dir
from buildgen.worker import client
from buildgen.worker.identity import canonical_interpreter, worker_identity

# Pools bound memory-heavy compilers (nvcc with CUTLASS needs ~2 GB per job). A pool the
# manifest gives no depth gets this one, so build.ninja never depends on the machine.
DEFAULT_POOL_DEPTH = 1


@dataclass(frozen=True)
class GenContext:
    manifest: Path  # absolute
    root: Path  # the manifest's folder, absolute
    build_dir: Path  # absolute; ninja's cwd
    python: tuple[str, ...]  # argv that starts this interpreter with buildgen importable
    version: str  # buildgen's version, put on every stage command line
    include_dir: Path  # buildgen's shared C headers
    generator_inputs: tuple[Path, ...]  # files and folders whose change re-runs gen
    pool_depths: tuple[tuple[str, int], ...] = ()
    # The stage worker actions go through (buildgen/worker): its identity and the client
    # script that reaches it. Empty: actions start the cache wrapper directly.
    worker: str = ""
    worker_client: str = ""
    # The compiled client (buildgen/worker/native.py), relative to the build dir; "": none.
    native_client: str = ""

    def path(self, path: Path) -> str:
        """How build.ninja names `path`: relative to the build dir when both lie under the
        manifest's folder (so the file does not embed the checkout's location), else absolute."""
        return _ninja_path(path, self.root, self.build_dir)

    def through_worker(self, mode: str) -> tuple[str, ...]:
        """The start of a command that a worker runs (client.MODES: exec, stage)."""
        if self.native_client:  # env PYTHONPATH=... stays in front of it
            return (*self.python[:-1], self.native_client, "--python", self.python[-1],
                    "--worker", self.worker, mode)
        return (*self.python, "-S", self.worker_client, "--worker", self.worker, mode)

    def pool_depth(self, pool: str) -> int:
        return dict(self.pool_depths).get(pool, DEFAULT_POOL_DEPTH)


# Memoized, and compared as strings rather than through Path.parents: gen names every
# model's files through here (thousands of calls for a large manifest, few distinct folders).
@lru_cache(maxsize=65536)
def _ninja_path(path: Path, root: Path, build_dir: Path) -> str:
    normal = os.path.normpath(path)
    if _is_under(normal, str(root)) and _is_under(str(build_dir), str(root)):
        return Path(os.path.relpath(normal, build_dir)).as_posix()
    return Path(normal).as_posix()


def _is_under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def current_context(
    manifest: Path, root: Path, build_dir: Path, pool_depths: tuple[tuple[str, int], ...] = (),
    probe: InstallationProbe | None = None,
) -> GenContext:
    """`probe`: the installation's part, started earlier by the caller (start_probing)."""
    python, worker = (probe or InstallationProbe(background=False)).result()
    return GenContext(
        manifest=Path(os.path.abspath(manifest)),
        root=Path(os.path.abspath(root)),
        build_dir=Path(os.path.abspath(build_dir)),
        python=python,
        version=buildgen.__version__,
        include_dir=include_dir(),
        generator_inputs=generator_inputs(),
        pool_depths=pool_depths,
        worker=worker,
        worker_client=str(Path(client.__file__).resolve()),
    )


class InstallationProbe:
    """The interpreter command and the worker identity of this gen, worked out on a thread
    while gen reads the manifest: the probe is a child interpreter (tens of ms, on another
    core) and the identity hashes buildgen's files (I/O and hashlib, outside the GIL).

    Per gen, never kept: the identity depends on the environment (PYTHONPATH) and on
    buildgen's files as they are now."""

    def __init__(self, background: bool = True):
        self._answer: tuple[tuple[str, ...], str] | None = None
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._work, name="buildgen-probe",
                                            daemon=True)
            self._thread.start()

    def _work(self) -> None:
        python = python_command()
        self._answer = (python, _worker_identity(python))

    def result(self) -> tuple[tuple[str, ...], str]:
        if self._thread is not None:
            self._thread.join()
        if self._answer is None:  # not started, or the thread failed: here, for its error
            self._work()
        assert self._answer is not None
        return self._answer


def start_probing() -> InstallationProbe:
    return InstallationProbe()


def _worker_identity(python: tuple[str, ...]) -> str:
    """For actions started by `python`: `env PYTHONPATH=... interpreter` sets their
    PYTHONPATH, a bare interpreter passes on the one ninja (and gen) runs with."""
    pythonpath = os.environ.get("PYTHONPATH", "")
    for word in python[:-1]:
        if word.startswith("PYTHONPATH="):
            pythonpath = word.partition("=")[2]
    return worker_identity(python[-1], pythonpath)


def generator_inputs() -> tuple[Path, ...]:
    """buildgen's own files (code, headers), rules/ and schemas/ (every file, and the folders
    so that an added file counts) and every definition file a plug-in brings: upgrading or
    editing buildgen regenerates build.ninja, with a new worker identity on its actions."""
    from buildgen.targets import definition_files

    found: set[Path] = {*buildgen_files(), *definition_files()}
    for top in (rules_dir(), schemas_dir()):
        if not top.is_dir():
            continue
        found.add(top)
        for path in top.rglob("*"):
            if "__pycache__" in path.parts or path.name.startswith("."):
                continue
            found.add(path)
    return tuple(sorted(found))


# Held while the interpreter is probed: a probing thread and gen's own calls find the
# answer once per process.
_PROBING = threading.Lock()


def python_command() -> tuple[str, ...]:
    with _PROBING:
        return _python_command()


@cache
def _python_command() -> tuple[str, ...]:
    """The interpreter running gen (by its canonical name), plus PYTHONPATH when buildgen
    is used from a checkout that is not installed: actions run in the build dir, where
    `import buildgen` would otherwise fail. An installed buildgen (editable or not) needs
    nothing added."""
    package_parent = Path(buildgen.__file__).resolve().parent.parent
    interpreter = canonical_interpreter(sys.executable)
    if _importable_elsewhere(Path(buildgen.__file__).resolve()):
        return (interpreter,)
    return ("env", f"PYTHONPATH={package_parent}", interpreter)


def _importable_elsewhere(init_file: Path) -> bool:
    """Whether a fresh interpreter, started outside the checkout and without PYTHONPATH,
    imports this very buildgen."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = "import buildgen, sys; sys.stdout.write(buildgen.__file__)"
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=tempfile.gettempdir(),
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and Path(done.stdout).resolve() == init_file
