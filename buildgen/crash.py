"""Bugs reported like errors: one located paragraph, the traceback in a crash-report file.

An exception that is not a BuildgenError is a bug in buildgen (or in a library it calls),
but a user still needs to know which model and which node set it off, and a maintainer
needs the traceback. `internal_error` writes the traceback to
<folder>/.buildgen/crash/<name>.txt and returns a BuildgenError whose message says where
it happened and whose hint names that file; the CLI and the stage runner print it like
any other error.

The node being processed is found in the traceback: the innermost frame holding a graph
node (an IR Node or an ONNX NodeProto) names it. No stage has to track it for the rare
crash, and a crash inside a backend's op code still names the node.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from buildgen import __version__
from buildgen.errors import BuildgenError, Diagnostic

CRASH_DIR = ".buildgen/crash"  # under the build dir
_MAX_MESSAGE = 400  # characters of the exception's text in the paragraph; the file has all


def node_in_traceback(tb: TracebackType | None) -> tuple[str, str] | None:
    """(name, op) of the node held by the innermost frame that holds one, or None."""
    found = None
    while tb is not None:
        frame_locals = tb.tb_frame.f_locals
        candidates = [frame_locals.get("node"), *frame_locals.values()]
        for value in candidates:
            described = _describe_node(value)
            if described is not None:
                found = described  # later frames are deeper: the last one found wins
                break
        tb = tb.tb_next
    return found


def _describe_node(value: object) -> tuple[str, str] | None:
    from buildgen.ir import Node

    if isinstance(value, Node):
        return value.name, value.op
    # An ONNX NodeProto, recognized without importing onnx.
    if type(value).__name__ == "NodeProto" and hasattr(value, "op_type"):
        return str(getattr(value, "name", "")), str(value.op_type)
    return None


def internal_error(
    exc: BaseException, *, what: str, source: str | None, folder: Path, name: str
) -> BuildgenError:
    """The error to print for the bug `exc`: `what` says what was being done (e.g. "the
    codegen stage of model 'm', backend 'c'"), `source` is the model file if known. The
    traceback goes to <folder>/.buildgen/crash/<name>.txt."""
    node = node_in_traceback(exc.__traceback__)
    where = f" at node '{node[0]}' ({node[1]})" if node and node[0] else ""
    if node and not node[0]:
        where = f" at a {node[1]} node"
    text = " ".join(str(exc).split()).removeprefix("internal error: ")
    if len(text) > _MAX_MESSAGE:
        text = text[: _MAX_MESSAGE - 1] + "…"
    detail = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    head = f"{source}: " if source else ""
    message = f"{head}internal error in {what}{where}: {detail}"
    report, problem = _write_report(exc, folder, name, message)
    if problem:
        hint = f"this is a bug in buildgen; its crash report could not be written ({problem})"
    else:
        hint = f"this is a bug in buildgen; the traceback is in {report}: please include it " \
            "in a bug report"
    error = BuildgenError(Diagnostic(message, hint=hint))
    error.__cause__ = exc
    return error


def slug(text: str) -> str:
    """`text` as one file name: path separators and odd characters become '_'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "crash"


def _write_report(
    exc: BaseException, folder: Path, name: str, message: str
) -> tuple[Path, str | None]:
    """The report's path, and why it could not be written (None when it was)."""
    path = (folder / CRASH_DIR / f"{slug(name)}.txt").absolute()
    lines: Sequence[str] = [
        f"buildgen {__version__} crash report",
        f"error: {message}",
        f"command: {' '.join(sys.argv)}",
        f"directory: {os.getcwd()}",
        f"python: {sys.version.split()[0]} on {platform.platform()}",
        "",
        *traceback.format_exception(exc),
    ]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(line.rstrip("\n") for line in lines) + "\n", encoding="utf-8")
    except OSError as problem:
        return path, f"{path}: {problem.strerror or problem}"
    return path, None
