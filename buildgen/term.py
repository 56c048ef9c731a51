"""Whether buildgen colours what it prints, and the environment ninja runs in to match.

Colour is on when the stream is a terminal (and TERM is not `dumb`), off whenever NO_COLOR
is set to anything non-empty (https://no-color.org), and forced on, even into a pipe, by a
non-empty CLICOLOR_FORCE or FORCE_COLOR other than `0`. NO_COLOR wins over the forcing
variables: it is the user's own off switch, while the others are often set for a whole CI
machine. Only severity words ("error:", "warning:") are ever coloured.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TextIO

FORCE_VARIABLES = ("CLICOLOR_FORCE", "FORCE_COLOR")

_RESET = "\033[0m"
_STYLES = {"error": "\033[1;31m", "warning": "\033[1;35m"}  # bold red, bold magenta


def _set(value: str | None) -> bool:
    return bool(value) and value != "0"


def color_enabled(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Whether text written to `stream` should carry colour."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    if any(_set(env.get(name)) for name in FORCE_VARIABLES):
        return True
    if env.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def severity(word: str, color: bool) -> str:
    """`word` ("error" or "warning") followed by a colon, coloured when `color` is on."""
    text = f"{word}:"
    return f"{_STYLES[word]}{text}{_RESET}" if color else text


def ninja_environ(stream: TextIO) -> dict[str, str]:
    """The environment to run ninja in, when its output ends up on `stream`.

    ninja colours nothing itself but strips colour codes from its actions' output unless
    its stdout is a terminal or CLICOLOR_FORCE is set; it ignores NO_COLOR. So: with colour
    on, CLICOLOR_FORCE=1, which also tells buildgen's own actions (whose stderr is ninja's
    pipe) to colour; with colour off, no forcing variable, and NO_COLOR passes through to
    the actions as it was."""
    env = dict(os.environ)
    if color_enabled(stream, env):
        env["CLICOLOR_FORCE"] = "1"
    else:
        for name in FORCE_VARIABLES:
            env.pop(name, None)
    return env
