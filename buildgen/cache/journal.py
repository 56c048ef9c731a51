"""What each action did: one JSON line per action in `<build>/.buildgen/actions.jsonl`.

Actions run in parallel processes; each appends its line with a single write to a file
opened with O_APPEND, which the kernel makes atomic for a line this small, so no lock is
needed. `buildgen build` reads the lines its own ninja run added for its summary.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

JOURNAL = ".buildgen/actions.jsonl"  # relative to the build dir
# How the summary groups rules into stages.
RULE_STAGES = {
    "import": "import", "partition": "partition", "codegen": "codegen",
    "executor": "codegen", "shared_kernels": "codegen",
    "link_kernels": "codegen", "report": "report", "cc": "compile",
    "link_shared": "link", "ar": "link",
}  # fmt: skip
# "executed": on the executor's workers; "fallback": here, after the executor failed it.
OUTCOMES = ("ran", "local", "remote", "executed", "fallback")


@dataclass(frozen=True)
class Entry:
    rule: str
    stage: str
    output: str  # the action's first output, relative to the build dir
    outcome: str  # one of OUTCOMES: "local" and "remote" were restored from a cache
    seconds: float
    exit_code: int = 0


def append(build_dir: Path, entry: Entry) -> None:
    line = json.dumps(
        {"rule": entry.rule, "stage": entry.stage, "out": entry.output,
         "outcome": entry.outcome, "seconds": round(entry.seconds, 4),
         "exit": entry.exit_code},
        sort_keys=True,
    ) + "\n"  # fmt: skip
    path = os.path.join(build_dir, JOURNAL)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:  # the first action of a build folder: .buildgen/ made here
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def journal_size(build_dir: Path) -> int:
    try:
        return (build_dir / JOURNAL).stat().st_size
    except FileNotFoundError:
        return 0


def read_entries(build_dir: Path, offset: int = 0) -> Iterator[Entry]:
    """The entries appended after byte `offset` (a size from journal_size)."""
    try:
        with open(build_dir / JOURNAL, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return
    for raw in data.splitlines():
        try:
            item = json.loads(raw)
            yield Entry(
                rule=str(item["rule"]), stage=str(item["stage"]), output=str(item["out"]),
                outcome=str(item["outcome"]), seconds=float(item["seconds"]),
                exit_code=int(item.get("exit", 0)),
            )
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a crash: skip it, count the rest
