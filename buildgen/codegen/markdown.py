"""Model-supplied text inside generated Markdown (report.md, kernel index.md).

A report is rendered by whatever shows it (a CI summary, a code host): a name must show as
itself and never become markup, a link, raw HTML or a new table cell.
"""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~&$-])")


def code(text: str) -> str:
    """`text` as an inline code span. Inside one nothing is markup, except '|' in a table
    row (GFM splits the cell first), so it is escaped; the fence is one backtick longer
    than the longest run in the text, with spaces so a leading/trailing backtick shows."""
    text = " ".join(text.splitlines()).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest or text.startswith(" ") or text.endswith(" ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def plain(text: str) -> str:
    """`text` as literal Markdown text: every character Markdown could read as markup is
    backslash-escaped, and line breaks become spaces."""
    return _SPECIAL.sub(r"\\\1", " ".join(text.splitlines()))
