"""Which of build.ninja's actions run on the executor (imported by every action: keep light).

- Compiles: where a build spends its time, and the compiler's own dependency scan names
  their inputs exactly (buildgen.remote.action).
- The Python stages, when `remote.python` names the workers' interpreter: they ship
  buildgen itself in the input root (buildgen.remote.stages says what travels and why).
  Off by default, because a worker needs buildgen's runtime (numpy, onnx) in its image.
- Links stay here: measured (bench_remote.py's project at 12 models, 4 workers on loopback,
  links sent to the executor for the measurement), a link took 0.96 s remotely against
  0.07 s here, its command 0.12 s of that on the worker; the library has to come back here
  anyway, and every object it links is already here (each remote compile's outputs are).
"""

from __future__ import annotations

from collections.abc import Sequence

from buildgen.remote.settings import ExecutorSettings

REMOTE_RULES = frozenset({"cc"})
STAGES_MODULE = "buildgen.stages"


class LocalOnly(Exception):
    """The action cannot be sent (a stage that names its inputs only as it runs): it runs
    here, which is no failure of the executor's."""


def sent_remotely(rule: str, command: Sequence[str], settings: ExecutorSettings) -> bool:
    if rule in REMOTE_RULES:
        return True
    return settings.python is not None and stage_arguments(command) is not None


def stage_arguments(command: Sequence[str]) -> list[str] | None:
    """The words after `-m buildgen.stages`, or None when `command` is not a stage."""
    for i in range(len(command) - 1):
        if command[i] == "-m" and command[i + 1] == STAGES_MODULE:
            return list(command[i + 2:])
    return None
