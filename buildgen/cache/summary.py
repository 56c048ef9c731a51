"""The end-of-build summary of `buildgen build`: what ran, what the caches gave, what ninja
skipped, and where the time went.

"Skipped" is counted, not guessed: ninja lists every command the requested targets need
(`ninja -t commands`); each action that neither ran nor was restored was up to date. The
count depends only on build.ninja and the names asked for, so it is kept beside the build
(`.buildgen/planned.json`, keyed by build.ninja's size, mtime and inode): a no-op build
then starts ninja once, not twice (at 200 models the second run cost ~25 ms of ~125).
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from buildgen.cache.journal import Entry
from buildgen.fsutil import write_atomic
from buildgen.ninja.gen_stamp import ninja_file_state
from buildgen.ninja.response_file import read_response_file
from buildgen.ninja.tool import run_ninja
from buildgen.term import severity

# In the command of every cached action, whether it starts the wrapper directly
# (`-m buildgen.cache exec --root ..`) or through a worker (`client.py ... exec --root ..`).
WRAPPER_MARK = " exec --root "
PLANNED = ".buildgen/planned.json"
# The order stages are listed in; others follow, sorted.
STAGE_ORDER = ("import", "partition", "codegen", "report", "compile", "link")


@dataclass(frozen=True)
class Summary:
    ran: int
    local: int
    remote: int
    skipped: int
    failed: int
    seconds_by_stage: tuple[tuple[str, float], ...]
    executed: int = 0  # of `ran`: on the executor's workers
    fell_back: int = 0  # of `ran`: here, after the executor failed them

    def lines(
        self, warnings: Sequence[str] = (), stopped: bool = False, color: bool = False
    ) -> list[str]:
        """`stopped`: the build failed, so what did not run was not necessarily up to date;
        `color`: the word "warning:" in colour (buildgen.term)."""
        total = self.ran + self.local + self.remote + self.skipped
        rest = "not run" if stopped else "up to date"
        notes = []
        if self.executed or self.fell_back:
            notes.append(f"{self.executed} on the executor")
        if self.fell_back:
            notes.append(f"{self.fell_back} locally after the executor failed")
        if self.failed:
            notes.append(f"{self.failed} of them failed")
        failed = f" ({', '.join(notes)})" if notes else ""
        head = (
            f"buildgen: {total} actions: {self.ran} ran{failed}, {self.local} restored from "
            f"the local cache, {self.remote} from the remote cache, {self.skipped} {rest}"
        )
        out = [head]
        if self.seconds_by_stage:
            times = ", ".join(f"{stage} {secs:.1f}s" for stage, secs in self.seconds_by_stage)
            out.append(f"  time by stage: {times}")
        out += [f"  {severity('warning', color)} {w}" for w in warnings]
        return out


def summarize(entries: Iterable[Entry], planned: int) -> Summary:
    """`planned`: the number of cached actions the build's targets need."""
    latest: dict[str, Entry] = {}
    seconds: dict[str, float] = {}
    for entry in entries:
        latest[entry.output] = entry  # an action run twice (a restarted build) counts once
        seconds[entry.stage] = seconds.get(entry.stage, 0.0) + entry.seconds
    outcomes = Counter(e.outcome for e in latest.values() if e.exit_code == 0)
    failed = sum(1 for e in latest.values() if e.exit_code != 0)
    done = len(latest)
    order = {stage: i for i, stage in enumerate(STAGE_ORDER)}
    stages = sorted(seconds, key=lambda s: (order.get(s, len(order)), s))
    return Summary(
        ran=outcomes["ran"] + outcomes["executed"] + outcomes["fallback"] + failed,
        local=outcomes["local"],
        remote=outcomes["remote"],
        skipped=max(planned - done, 0),
        failed=failed,
        seconds_by_stage=tuple((s, seconds[s]) for s in stages),
        executed=outcomes["executed"],
        fell_back=outcomes["fallback"],
    )


def planned_actions(build_dir: Path, names: Sequence[str]) -> int:
    """How many cached actions building `names` (default: ninja's defaults) involves: the
    commands `ninja -t commands` lists, and the compiles of the shared kernels objects that
    the links' response files list (ninja learns those from dyndep files, which -t
    commands does not read) that it does not list already."""
    state, key = ninja_file_state(build_dir), "\0".join(names)
    memo = build_dir / PLANNED
    known: dict[str, object] = {}
    with contextlib.suppress(OSError, ValueError):
        known = json.loads(memo.read_text(encoding="utf-8"))
    plans = known.get("plans") if known.get("ninja") == state else None
    plans = plans if isinstance(plans, dict) else {}
    plan = plans.get(key)
    if not (isinstance(plan, dict) and isinstance(plan.get("count"), int)
            and isinstance(plan.get("lists"), list) and isinstance(plan.get("outputs"), list)):
        done = run_ninja(build_dir, ["-t", "commands", *names], capture=True)
        if done.returncode != 0:
            return 0
        lines = [line.split() for line in done.stdout.splitlines() if WRAPPER_MARK in line]
        plan = {
            "count": len(lines),
            "lists": sorted({w[1:] for words in lines for w in words if w.startswith("@")}),
            "outputs": sorted({out for words in lines if (out := _first_output(words))}),
        }
        with contextlib.suppress(OSError):
            write_atomic(memo, json.dumps({"ninja": state, "plans": {**plans, key: plan}},
                                          sort_keys=True))
    listed = _listed_objects(build_dir, plan["lists"]) - set(plan["outputs"])
    return int(plan["count"]) + len(listed)


def _first_output(words: list[str]) -> str | None:
    """The first `--out` of a wrapped command's words."""
    with contextlib.suppress(ValueError, IndexError):
        return words[words.index("--out") + 1]
    return None


def _listed_objects(build_dir: Path, response_files: Iterable[str]) -> set[str]:
    """The objects the response files list (a missing one lists none)."""
    listed: set[str] = set()
    for name in response_files:
        listed.update(read_response_file(str(build_dir / name)) or [])
    return listed
