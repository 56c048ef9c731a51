"""What the planner needs to know about this installation and where things are.

Everything here is decided once, at gen time ("options belong in the generator"), and
handed to the planner as plain values so tests can plan with fixed ones.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import buildgen
from buildgen.resources import include_dir, rules_dir, schemas_dir

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

    def path(self, path: Path) -> str:
        """How build.ninja names `path`: relative to the build dir when both lie under the
        manifest's folder (so the file does not embed the checkout's location), else absolute."""
        path = Path(os.path.normpath(path))
        if _is_under(path, self.root) and _is_under(self.build_dir, self.root):
            return Path(os.path.relpath(path, self.build_dir)).as_posix()
        return path.as_posix()

    def pool_depth(self, pool: str) -> int:
        return dict(self.pool_depths).get(pool, DEFAULT_POOL_DEPTH)


def _is_under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def current_context(
    manifest: Path, root: Path, build_dir: Path, pool_depths: tuple[tuple[str, int], ...] = ()
) -> GenContext:
    return GenContext(
        manifest=Path(os.path.abspath(manifest)),
        root=Path(os.path.abspath(root)),
        build_dir=Path(os.path.abspath(build_dir)),
        python=python_command(),
        version=buildgen.__version__,
        include_dir=include_dir(),
        generator_inputs=generator_inputs(),
        pool_depths=pool_depths,
    )


def generator_inputs() -> tuple[Path, ...]:
    """rules/ and schemas/ (every file, and the folders so that an added file counts), every
    definition file a plug-in brings, and the file holding buildgen's version, so upgrading
    buildgen regenerates build.ninja."""
    from buildgen.targets import definition_files

    found: set[Path] = {Path(buildgen.__file__).resolve(), *definition_files()}
    for top in (rules_dir(), schemas_dir()):
        if not top.is_dir():
            continue
        found.add(top)
        for path in top.rglob("*"):
            if "__pycache__" in path.parts or path.name.startswith("."):
                continue
            found.add(path)
    return tuple(sorted(found))


@cache
def python_command() -> tuple[str, ...]:
    """The interpreter running gen, plus PYTHONPATH when buildgen is used from a checkout
    that is not installed: actions run in the build dir, where `import buildgen` would
    otherwise fail. An installed buildgen (editable or not) needs nothing added."""
    package_parent = Path(buildgen.__file__).resolve().parent.parent
    if _importable_elsewhere(Path(buildgen.__file__).resolve()):
        return (sys.executable,)
    return ("env", f"PYTHONPATH={package_parent}", sys.executable)


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
