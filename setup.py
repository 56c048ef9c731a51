"""What pyproject.toml cannot say.

- rules/ and schemas/ ship as packages of buildgen. They live at the top of the repository
  (DESIGN.md's layout) and are mapped to buildgen._rules and buildgen._schemas by
  [tool.setuptools.package-dir]; package discovery does not follow such mappings, so they
  are listed here.
- The `c` host's kernels are compiled at install time, on this machine with its compiler,
  into buildgen/_prebuilt/ (buildgen/cache/prebuilt.py says why and how a build uses them).
  BUILDGEN_PREBUILD=off skips it; a failure (no C compiler) is a warning, never a failed
  install: the first build then compiles them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from setuptools import Command, find_packages, setup
from setuptools.command.build import build

HERE = Path(__file__).resolve().parent
STORE = Path("buildgen") / "_prebuilt"


class BuildKernels(Command):
    description = "compile the c host's kernels into buildgen/_prebuilt"
    user_options: list[tuple[str, str | None, str]] = []

    def initialize_options(self) -> None:
        self.build_lib: str | None = None
        self.editable_mode = False  # set by setuptools for `pip install -e`

    def finalize_options(self) -> None:
        self.set_undefined_options("build_py", ("build_lib", "build_lib"))

    def run(self) -> None:
        if os.environ.get("BUILDGEN_PREBUILD", "").strip().lower() in ("0", "off", "false", "no"):
            return
        # An editable install imports buildgen from this tree: the store goes beside it.
        assert self.build_lib is not None
        store = HERE / STORE if self.editable_mode else Path(self.build_lib) / STORE
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run([sys.executable, "-m", "buildgen.cache.prebuilt", str(store)],
                              cwd=HERE, env=env)
        if done.returncode != 0:
            print("warning: buildgen's kernels were not compiled at install time",
                  file=sys.stderr)

    def get_outputs(self) -> list[str]:
        return []

    def get_output_mapping(self) -> dict[str, str]:
        return {}


class Build(build):
    sub_commands = [*build.sub_commands, ("build_kernels", None)]


setup(
    packages=find_packages(include=["buildgen", "buildgen.*"])
    + ["buildgen._rules", "buildgen._schemas", "buildgen._schemas.targets"],
    cmdclass={"build": Build, "build_kernels": BuildKernels},
)
