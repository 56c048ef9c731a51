"""`buildgen report [models...] [--target T]`: build, then draw each partition.

Writes, next to each library, `report.html` (the regions explained, the graph drawn inline,
and the model's actions of its last build on a timeline, from the build dir's .ninja_log)
and `partition.svg` (the drawing alone): nodes coloured by backend, regions outlined.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.fsutil import write_if_changed
from buildgen.partition.cli_support import add_selection_arguments, load, prepare

HTML_NAME = "report.html"
SVG_NAME = "partition.svg"

if TYPE_CHECKING:
    from buildgen.ninja.trace import NinjaLog


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_selection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from buildgen.ninja.cli_trace import NINJA_LOG
    from buildgen.partition.explain import explain
    from buildgen.partition.html import render_html
    from buildgen.partition.svg import render_svg
    from buildgen.partition.timeline import describe, model_timeline, render_timeline_svg

    gen, pairs = prepare(args, "all")
    log = _ninja_log(gen.build_dir)
    for pair in pairs:
        loaded = load(gen.build_dir, pair)
        assert loaded.partition is not None
        host = loaded.target.host_kind
        svg = render_svg(loaded.graph, loaded.partition, loaded.target.backends, host)
        timeline = model_timeline(log, pair.model.name, pair.target)
        section = describe(timeline, NINJA_LOG) + render_timeline_svg(timeline)
        page = render_html(explain(loaded.graph, loaded.target, loaded.partition), svg, host,
                           section)
        folder = gen.build_dir / pair.model.name / pair.target
        write_if_changed(folder / SVG_NAME, svg)
        write_if_changed(folder / HTML_NAME, page)
        print(f"{folder / HTML_NAME}")
    return 0


def _ninja_log(build_dir: Path) -> NinjaLog:
    """The build dir's log, read as `buildgen trace` reads it (an empty one when ninja
    wrote none: the timeline then says so)."""
    from buildgen.ninja.cli_trace import NINJA_LOG
    from buildgen.ninja.trace import NinjaLog, parse_ninja_log

    path = build_dir / NINJA_LOG
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        return NinjaLog(0, ())
    return parse_ninja_log(text, str(path))
