"""The build folder is checked before anything is written into it.

buildgen writes build.ninja, option files and libraries there and `buildgen clean` deletes
them, so a build folder that is `/`, the project's own folder (where the user's
build.ninja may live), one of its parents, a regular file, a symlink loop or another
tool's folder (a CMake build folder holds its own build.ninja) is refused with the reason.
A symlink is followed: the build happens in the folder it points to, and relative paths
in build.ninja are computed from there, so they stay right.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from buildgen.cache.settings import SETTINGS_FILE
from buildgen.errors import BuildgenError, Diagnostic

# Every buildgen build folder holds this once gen has run: the mark of a folder we own.
MARK = SETTINGS_FILE


def checked_build_dir(build_dir: Path, project: Path, *, writing: bool = True) -> Path:
    """`build_dir` with symlinks resolved, or a BuildgenError saying why it cannot be one.

    `project` is the manifest's folder. With `writing` False (clean, tools), a folder buildgen
    never wrote is accepted: those commands then find nothing of ours there."""
    shown = str(build_dir)
    try:
        real = Path(os.path.realpath(build_dir, strict=True))
    except FileNotFoundError:
        real = Path(os.path.realpath(build_dir))
    except OSError as exc:
        reason = "is a symlink loop" if exc.errno == errno.ELOOP else f"cannot be read: {exc}"
        raise _refuse(shown, reason) from None
    except ValueError:  # os.path.realpath: "embedded null byte"
        raise _refuse(repr(shown), "holds a NUL character, which no path can") from None
    project = Path(os.path.realpath(project))
    if real == Path(real.anchor):
        raise _refuse(shown, "is the root of the file system")
    if real == project:
        raise _refuse(shown, "is the manifest's own folder, where the project's files are",
                      hint="use a folder of its own, e.g. `build_dir: build`")
    if real in project.parents:
        raise _refuse(shown, f"is a parent of the manifest's folder {project}")
    if real.exists() and not real.is_dir():
        raise _refuse(shown, "exists and is not a folder")
    if writing and real.is_dir() and not (real / MARK).exists() and any(real.iterdir()):
        raise _refuse(shown, "holds files that buildgen did not write (another tool's build "
                      "folder?); buildgen would overwrite them",
                      hint="name an empty or new folder, or one buildgen built before")
    return real


def _refuse(shown: str, reason: str, hint: str | None = None) -> BuildgenError:
    return BuildgenError(Diagnostic(f"build folder {shown} {reason}", hint=hint or
                                    "set build_dir in the manifest or --build-dir to a folder "
                                    "inside or beside the project"))
