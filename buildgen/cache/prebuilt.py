"""The store of the `c` host's kernels, filled when buildgen is installed.

Every library of a `c` host links the kernels of bg_kernels_*.c (the GEMM, the
convolutions, the pooling, the thread pool), and they are the same objects for every model
built with the same compiler and flags: three ISA levels of ~2-5 s of -O3 each, the larger
part of a first build's time. TVM and onnxruntime ship their runtimes compiled; a compiled
object ties a wheel to one compiler, so buildgen compiles its kernels when it is installed,
on the machine and with the compiler that will build the models: setup.py's
`build_kernels` step runs `python -m buildgen.cache.prebuilt <folder>`, which builds the
default `{kind: c}` target's kernels through the action cache into a store of its own
format inside the package (`buildgen/_prebuilt/`; the step is skipped with
BUILDGEN_PREBUILD=off, and a failure only costs the first build its compiles).

A build's lookup reads that store after the local one (exec.py; BUILDGEN_PREBUILT=off or
another folder: settings.py). It is an action cache like any other: a key covers the
compiler's identity, the command line, the bytes of every header and the tool environment,
and names buildgen's own files `<buildgen>/...` wherever it is installed (keys.py), so a
hit is the object this build would have compiled, and another compiler, another `cc` or
other flags simply miss. Nothing is copied out of it into the local store.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from buildgen.cache.keys import PACKAGE_DIR

STORE_FOLDER = "_prebuilt"  # in buildgen's package folder
# What the store keeps of an action cache's folder: entries and blobs, not its statistics,
# tool memo or lock files (they describe the process that filled it).
KEPT = ("ac", "cas")
_MANIFEST = """\
# The kernels every `{kind: c}` library links (buildgen/cache/prebuilt.py).
buildgen: 1
targets:
  cpu: {kind: c}
models:
  kernels:
    source: kernels.onnx
    inputs: {x: [1]}
    targets: [cpu]
"""


def installed_store() -> Path | None:
    """The store setup.py filled in this installation, if it did."""
    store = Path(PACKAGE_DIR) / STORE_FOLDER
    return store if (store / "ac").is_dir() else None


def fill(store: Path) -> int:
    """Compile the default `c` target's kernels into a new store at `store` (replacing
    any there); returns how many objects it holds."""
    from buildgen.ninja.tool import ninja_binary

    with tempfile.TemporaryDirectory(prefix="buildgen-prebuild-") as scratch:
        project = Path(scratch) / "project"
        project.mkdir()
        (project / "BUILD.yaml").write_text(_MANIFEST)
        (project / "kernels.onnx").write_bytes(b"")  # named by the plan; never read
        cache = Path(scratch) / "cache"
        env = {**os.environ, "BUILDGEN_CACHE_DIR": str(cache), "BUILDGEN_CACHE": "on",
               "BUILDGEN_WORKERS": "off", "BUILDGEN_PREBUILT": "off"}
        for name in ("BUILDGEN_REMOTE_CACHE", "BUILDGEN_REMOTE_EXECUTOR"):
            env.pop(name, None)
        _run([sys.executable, "-m", "buildgen", "gen"], project, env)
        build = project / "build"
        listed = _run([ninja_binary(), "-C", str(build), "-t", "targets", "rule", "cc"],
                      project, env)
        objects = sorted(line for line in listed.splitlines() if line.startswith("_shared/"))
        if not objects:
            raise RuntimeError("the default c target plans no shared kernels")
        _run([ninja_binary(), "-C", str(build), *objects], project, env)
        staged = store.with_name(store.name + ".partial")
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        for name in KEPT:
            shutil.copytree(cache / name, staged / name)
        shutil.rmtree(store, ignore_errors=True)
        os.replace(staged, store)
    return len(objects)


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n"
                           f"{done.stdout}{done.stderr}")
    return done.stdout


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m buildgen.cache.prebuilt <store folder>", file=sys.stderr)
        return 2
    store = Path(os.path.abspath(argv[0]))
    try:
        count = fill(store)
    except (OSError, RuntimeError) as exc:
        print(f"buildgen: the c host's kernels were not compiled ahead ({exc}); "
              "the first build compiles them", file=sys.stderr)
        return 1
    print(f"buildgen: {count} kernel objects compiled into {store}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
