"""`buildgen report [models...] [--target T]`: build, then draw each partition.

Writes, next to each library, `report.html` (the regions explained, the graph drawn inline)
and `partition.svg` (the drawing alone): nodes coloured by backend, regions outlined.
"""

from __future__ import annotations

import argparse

from buildgen.fsutil import write_if_changed
from buildgen.partition.cli_support import add_selection_arguments, load, prepare

HTML_NAME = "report.html"
SVG_NAME = "partition.svg"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_selection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from buildgen.partition.explain import explain
    from buildgen.partition.html import render_html
    from buildgen.partition.svg import render_svg

    gen, pairs = prepare(args, "all")
    for pair in pairs:
        loaded = load(gen.build_dir, pair)
        assert loaded.partition is not None
        host = loaded.target.host_kind
        svg = render_svg(loaded.graph, loaded.partition, loaded.target.backends, host)
        page = render_html(explain(loaded.graph, loaded.target, loaded.partition), svg, host)
        folder = gen.build_dir / pair.model.name / pair.target
        write_if_changed(folder / SVG_NAME, svg)
        write_if_changed(folder / HTML_NAME, page)
        print(f"{folder / HTML_NAME}")
    return 0
