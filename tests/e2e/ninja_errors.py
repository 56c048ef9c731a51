"""Which model a failed action of a keep-going `buildgen build` belongs to, from ninja's
output: shared by the node tests and the real-model corpus (tests/corpus)."""

from __future__ import annotations

import re

_FAILED = re.compile(r"^FAILED: (?:\[code=\d+\] )?(?P<outputs>.*)$")
_PROGRESS = re.compile(r"^\[\d+/\d+\] ")


def first_errors(ninja_output: str) -> dict[str, str]:
    """Model name -> the first line of its first failed action's output.

    Ninja prints `FAILED: <outputs>`, the command line, then the command's output; every
    output path of a model starts with `<model>/`.
    """
    errors: dict[str, str] = {}
    lines = ninja_output.splitlines()
    for i, line in enumerate(lines):
        match = _FAILED.match(line)
        if not match:
            continue
        model = match["outputs"].split("/", 1)[0].strip()
        body = []
        for follow in lines[i + 2 :]:
            if _FAILED.match(follow) or _PROGRESS.match(follow) or follow.startswith("ninja:"):
                break
            if follow.strip():
                body.append(follow.strip())
        flagged = [b for b in body if "error" in b.lower()]
        errors.setdefault(model, (flagged or body or ["(no output)"])[0])
    return errors
