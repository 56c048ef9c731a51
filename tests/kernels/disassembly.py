"""Reading `objdump -d` output: one function's instructions, and its loops."""

from __future__ import annotations

import re

# A branch and its target address: aarch64's `b.ne 1234`, x86's `jne 1234`.
_BRANCH = re.compile(r"\b(?:b\.\w+|j\w+)\s+([0-9a-f]+)\s")


def function_lines(disassembly: str, name: str) -> list[str]:
    """The instruction lines of one function in `objdump -d` output."""
    lines = disassembly.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith(f"<{name}>:"))
    body = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        body.append(line)
    return body


def loops(body: list[str]) -> list[list[str]]:
    """Each backward branch's loop body: the instructions from its target to the branch."""
    addresses = [int(line.split(":", 1)[0], 16) for line in body]
    found = []
    for i, line in enumerate(body):
        branch = _BRANCH.search(line)
        if branch and int(branch.group(1), 16) < addresses[i]:
            start = addresses.index(int(branch.group(1), 16))
            found.append(body[start:i + 1])
    return found
