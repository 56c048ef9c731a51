"""options/<backend>.json: one backend's codegen options, written by gen, read by codegen.

Only json is imported here, so the codegen stage reads its options without loading the
target registry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from buildgen.errors import error

FORMAT = "buildgen-options"
VERSION = 1


def dump_options(backend: str, options: Mapping[str, Any]) -> str:
    doc = {"format": FORMAT, "version": VERSION, "backend": backend, "options": dict(options)}
    return json.dumps(doc, sort_keys=True, indent=1) + "\n"


def load_options(path: str | Path) -> tuple[str, dict[str, Any]]:
    """(backend kind, options) from an options file."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise error(f"{path}: cannot read options file: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise error(f"{path}: not a buildgen options file of version {VERSION}")
    return doc["backend"], doc["options"]
