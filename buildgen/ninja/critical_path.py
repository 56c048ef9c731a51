"""Where a build's time went: seconds per stage, and the critical path of the last run.

The critical path is the chain of actions that decided when the build finished: from the
action that finished last, step to the input whose action finished last, and so on back
to an action none of whose inputs was built in that run. Edges come from ninja itself
(`ninja -t query`, one call per step: a path is a dozen actions, not the whole graph).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from buildgen.ninja.trace import Job, stage_of


@dataclass(frozen=True)
class Step:
    job: Job
    stage: str

    @property
    def seconds(self) -> float:
        return self.job.seconds


def seconds_by_stage(jobs: Sequence[Job]) -> dict[str, float]:
    """Action seconds summed per stage (so parallel actions add up), largest first."""
    totals: dict[str, float] = {}
    for job in jobs:
        stage = stage_of(job.outputs[0])
        totals[stage] = totals.get(stage, 0.0) + job.seconds
    return dict(sorted(totals.items(), key=lambda item: (-item[1], item[0])))


def critical_path(jobs: Sequence[Job], inputs_of: Callable[[str], Sequence[str]]
                  ) -> list[Step]:
    """The chain, first action first; `inputs_of(output)` lists what its edge reads."""
    if not jobs:
        return []
    by_output = {output: job for job in jobs for output in job.outputs}
    current = max(jobs, key=lambda j: (j.end_ms, j.outputs))
    chain = [current]
    while True:
        built = [by_output[i] for i in inputs_of(current.outputs[0]) if i in by_output]
        built = [job for job in built if job not in chain]
        if not built:
            break
        current = max(built, key=lambda j: (j.end_ms, j.outputs))
        chain.append(current)
    return [Step(job, stage_of(job.outputs[0])) for job in reversed(chain)]


def ninja_inputs(build_dir: Path) -> Callable[[str], list[str]]:
    """inputs_of for the build in `build_dir`: explicit, implicit and order-only inputs,
    as `ninja -t query` lists them."""
    from buildgen.ninja.tool import run_ninja

    def inputs_of(output: str) -> list[str]:
        done = run_ninja(build_dir, ["-t", "query", output], capture=True)
        if done.returncode != 0:
            return []
        found: list[str] = []
        section = ""
        for line in done.stdout.splitlines():
            stripped = line.strip()
            if line.startswith("  ") and not line.startswith("    "):
                section = stripped.split(":", 1)[0]
            elif section == "input" and stripped:
                found.append(stripped.removeprefix("|| ").removeprefix("| "))
        return found

    return inputs_of


def summary_lines(jobs: Sequence[Job], path: Sequence[Step]) -> list[str]:
    if not jobs:
        return []
    wall = (max(j.end_ms for j in jobs) - min(j.start_ms for j in jobs)) / 1e3
    stages = ", ".join(f"{stage} {seconds:.1f}s" for stage, seconds in
                       seconds_by_stage(jobs).items())
    lines = [f"time by stage (action seconds, summed): {stages}"]
    if path:
        total = sum(step.seconds for step in path)
        lines.append(f"critical path: {len(path)} actions, {total:.1f}s of the run's "
                     f"{wall:.1f}s wall:")
        lines += [f"  {step.seconds:6.2f}s  {step.stage:<9} {step.job.outputs[0]}"
                  for step in path]
    return lines
