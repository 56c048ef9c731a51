"""A Python stage (`python -m buildgen.stages ...`) as a remote action.

What travels, and why (the choice the remote-execution issue asks for):
- buildgen's own package, its rules/ and schemas/, in the input root, imported through
  PYTHONPATH: the very bytes whose digest is in the action's key. A worker image could not
  follow buildgen's edits, and a worker with another buildgen must never answer.
- The interpreter and buildgen's dependencies stay the worker's: selected by the
  `buildgen-python` platform property (buildgen.remote.runtime), which names their versions.
  They are large, compiled, and change only with an upgrade, which is what images are for.
- The stage's inputs: the action's declared ones and those the stage names before it runs
  (a stage module's `reads`: the external-data files of a model, weights.bin). A stage that
  cannot name them (a partition `step:` module of the user's) runs here.

The interpreter is `remote.python` (a name on the action's PATH, or a path on the
workers), not this machine's absolute path, which a worker image would not have.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cache

from buildgen.remote.action import PACKAGE_DIR, Layout
from buildgen.remote.rules import STAGES_MODULE, LocalOnly
from buildgen.remote.runtime import RUNTIME_PROPERTY, runtime_property
from buildgen.remote.settings import PYTHON_KIND, ExecutorSettings


def stage_inputs(arguments: Sequence[str]) -> list[str]:
    """Files the stage reads beyond its declared inputs. Raises LocalOnly when the stage
    cannot name them before it runs."""
    from buildgen.stages.runner import files_read

    try:
        found = files_read(arguments)
    except Exception as exc:  # noqa: BLE001 - a bad model or argument: running it here says
        raise LocalOnly(f"its inputs could not be listed ({exc})") from exc
    if found is None:
        raise LocalOnly("its inputs are known only once it runs")
    return found


def stage_command(settings: ExecutorSettings, arguments: Sequence[str]) -> list[str]:
    assert settings.python is not None
    return [settings.python, "-m", STAGES_MODULE, *arguments]


def stage_environment(layout: Layout) -> dict[str, str]:
    """What a worker's interpreter needs besides PATH: buildgen from the input root."""
    place = layout.place(PACKAGE_DIR)
    assert place is not None  # the Layout always places buildgen's package
    return {
        "PYTHONPATH": os.path.relpath(os.path.dirname(place) or ".",
                                      layout.working_directory or "."),
        "PYTHONDONTWRITEBYTECODE": "1",  # the input root is the worker's, not a cache
        "PYTHONNOUSERSITE": "1",
    }


def stage_platform(settings: ExecutorSettings) -> tuple[tuple[str, str], ...]:
    merged = dict(settings.platform_for(PYTHON_KIND))
    merged[RUNTIME_PROPERTY] = runtime_property()
    return tuple(sorted(merged.items()))


@cache
def package_files() -> tuple[str, ...]:
    """buildgen's files as a stage imports and reads them (the package, rules/ and schemas/,
    no bytecode): the files whose digest is in a stage's key."""
    from buildgen.resources import buildgen_files

    return tuple(str(path) for path in buildgen_files())
