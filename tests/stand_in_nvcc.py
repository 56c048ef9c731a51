"""A stand-in CUDA toolkit for tests of what the build runs, not what nvcc makes: bin/nvcc
turns a compile into an empty object plus a depfile and logs the source it was given
(one line per compile in <toolkit>/compiled.log); anything else (a link, --version) runs
the real nvcc. Headers and libraries are the real toolkit's (symlinked), so gen and links
see a working CUDA while CUTLASS compiles take no time."""

from __future__ import annotations

import stat
from pathlib import Path

CUDA = Path("/usr/local/cuda")
HAS_CUDA_HEADERS = (CUDA / "include" / "cuda_runtime_api.h").is_file()

_SCRIPT = """#!/bin/sh
out=""; dep=""; src=""; compile=0; prev=""
for a in "$@"; do
  case "$prev" in -o) out="$a";; -MF) dep="$a";; esac
  case "$a" in -c) compile=1;; *.cu|*.c|*.S) src="$a";; esac
  prev="$a"
done
if [ "$compile" = 1 ]; then
  echo "$src" >> "{log}"
  cc -x c /dev/null -c -o "$out" || exit 1
  [ -n "$dep" ] && echo "$out: $src" > "$dep"
  exit 0
fi
exec {real} "$@"
"""


def stand_in_toolkit(folder: Path) -> Path:
    """A toolkit at `folder` (made here) whose nvcc compiles nothing; returns `folder`."""
    (folder / "bin").mkdir(parents=True)
    nvcc = folder / "bin" / "nvcc"
    nvcc.write_text(_SCRIPT.format(log=folder / "compiled.log", real=CUDA / "bin" / "nvcc"))
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    (folder / "include").symlink_to(CUDA / "include")
    (folder / "lib64").symlink_to(CUDA / "lib64")
    return folder

