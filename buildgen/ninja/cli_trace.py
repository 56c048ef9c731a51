"""`buildgen trace`: the build dir's .ninja_log -> a Chrome trace of the last build.

Reads only what ninja already wrote: no build runs. The trace shows each action as a bar
on a lane (actions running at once get different lanes), named by its first output and
categorised by buildgen stage; the command also prints the last run's time per stage and
its critical path (critical_path.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from buildgen.errors import BuildgenError, Diagnostic
from buildgen.fsutil import write_atomic
from buildgen.ninja.cli_common import add_manifest_arguments, resolve_build_dir
from buildgen.ninja.critical_path import critical_path, ninja_inputs, summary_lines
from buildgen.ninja.trace import (
    chrome_trace,
    jobs_of,
    parse_ninja_log,
    render_trace,
    split_builds,
)

NINJA_LOG = ".ninja_log"
DEFAULT_OUTPUT = "trace.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser)
    parser.add_argument(
        "-o", "--output", type=Path, default=None,
        help=f"where to write the trace (default: <build dir>/{DEFAULT_OUTPUT})",
    )
    parser.add_argument(
        "--all", action="store_true",
        help="every ninja run the log holds, one process each (default: the last run only)",
    )


def run(args: argparse.Namespace) -> int:
    build_dir = resolve_build_dir(args)
    log_path = build_dir / NINJA_LOG
    try:
        text = log_path.read_text(encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        raise BuildgenError(Diagnostic(
            f"no {NINJA_LOG} in {build_dir}: nothing was built there yet",
            hint="run `buildgen build` first (with the same --manifest/--build-dir)",
        )) from None
    log = parse_ninja_log(text, str(log_path))
    trace = chrome_trace(log, all_builds=args.all)
    output = args.output if args.output is not None else build_dir / DEFAULT_OUTPUT
    write_atomic(output, render_trace(trace))
    actions = sum(1 for e in trace["traceEvents"] if e["ph"] == "X")
    runs = trace["otherData"]["runs"]
    what = f"{actions} actions of {runs} ninja run{'s' if runs != 1 else ''}"
    print(f"wrote {output} ({what})")
    print("open it in chrome://tracing (Load) or drop it on https://ui.perfetto.dev")
    builds = split_builds(log.entries)
    if builds:
        jobs = jobs_of(builds[-1])
        path = critical_path(jobs, ninja_inputs(build_dir))
        print("\n".join(summary_lines(jobs, path)))
    return 0
