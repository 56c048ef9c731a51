"""`buildgen clean`: remove what the build wrote, and nothing else.

ninja knows every file the build writes (gen's option files are declared outputs of the
generator edge), so ninja does the deleting: `-t cleandead` for outputs of models or
targets since removed from the manifest (they are in .ninja_log but no longer in the
graph), then `-t clean -g` for everything in the graph, build.ninja included. Afterwards
only folders that held outputs and are now empty are removed.
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from buildgen.errors import BuildgenError
from buildgen.ninja.cli_common import add_manifest_arguments, resolve_build_dir
from buildgen.ninja.layout import BUILD_NINJA
from buildgen.ninja.tool import run_ninja

_NINJA_STATE = (".ninja_log", ".ninja_deps")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser)


def run(args: argparse.Namespace) -> int:
    build_dir = resolve_build_dir(args)
    if not (build_dir / BUILD_NINJA).is_file():
        return 0  # never generated here: nothing of ours to remove
    listed = run_ninja(build_dir, ["-t", "targets", "all"], capture=True)
    if listed.returncode != 0:
        raise BuildgenError(f"ninja -t targets failed in {build_dir}:\n{listed.stderr.strip()}")
    folders = _output_folders(build_dir, listed.stdout)
    for tool_args in (["-t", "cleandead"], ["-t", "clean", "-g"]):
        done = run_ninja(build_dir, tool_args, capture=True)
        if done.returncode != 0:
            raise BuildgenError(f"ninja {' '.join(tool_args)} failed:\n{done.stderr.strip()}")
    for name in _NINJA_STATE:
        (build_dir / name).unlink(missing_ok=True)
    # Deepest first, so a parent is empty by the time it is tried.
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        # A folder that is not empty holds something we did not write: it stays.
        with contextlib.suppress(OSError):
            folder.rmdir()
    return 0


def _output_folders(build_dir: Path, targets_output: str) -> set[Path]:
    """Folders (strictly inside the build dir) that hold outputs, and their parents."""
    folders: set[Path] = set()
    for line in targets_output.splitlines():
        path, _, _rule = line.rpartition(": ")
        if not path:
            continue
        folder = (build_dir / path).parent
        while folder != build_dir and build_dir in folder.parents:
            folders.add(folder)
            folder = folder.parent
    return folders
