"""Dyndep files that stand in until the action writing them has run.

ninja reads a dyndep file once the action writing it has finished; a dry run (`ninja -n`,
`buildgen build -n`) runs no action, so on a build folder that has never built, ninja
(1.13 included) stops at the first dyndep file it cannot load. gen therefore writes each
missing one with everything its edges may take (Action.dynamic_inputs): a dry run then
lists every action that could run. The real build re-runs the writing action first (it has
no entry in ninja's log), and ninja loads the file only after that.
"""

from __future__ import annotations

from pathlib import Path

from buildgen.fsutil import write_atomic
from buildgen.ninja.plan import BuildPlan
from buildgen.ninja.writer import escape_path, escape_paths

DYNDEP_VERSION_LINE = "ninja_dyndep_version = 1"


def dyndep_text(edges: list[tuple[str, tuple[str, ...]]]) -> str:
    """A dyndep file adding implicit inputs to edges: (edge's first output, inputs)."""
    lines = [DYNDEP_VERSION_LINE]
    for output, inputs in edges:
        added = f" | {escape_paths(inputs)}" if inputs else ""
        lines.append(f"build {escape_path(output)}: dyndep{added}")
    return "\n".join(lines) + "\n"


def write_missing_dyndeps(out_dir: Path, plan: BuildPlan) -> None:
    edges: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for action in plan.actions:
        if action.dyndep is not None:
            edges.setdefault(action.dyndep, []).append(
                (action.outputs[0], action.dynamic_inputs))
    for dyndep, listed in edges.items():
        path = out_dir / dyndep
        if not path.exists():
            write_atomic(path, dyndep_text(listed))
