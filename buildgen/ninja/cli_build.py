"""`buildgen build [names...] [-- ninja args]`: gen, then ninja in the build dir.

gen always runs first: it is cheap and rewrites only files whose bytes change, so a build
never runs against a build.ninja older than the manifest.
"""

from __future__ import annotations

import argparse

from buildgen.ninja.cli_common import add_manifest_arguments
from buildgen.ninja.gen import generate
from buildgen.ninja.tool import run_ninja


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser)
    parser.add_argument(
        "names", nargs="*",
        help="what to build: a model, <model>-<target>, or an output path (default: all)",
    )
    parser.epilog = "Arguments after `--` go to ninja, e.g. `buildgen build -- -j4 -k0`."


def run(args: argparse.Namespace) -> int:
    result = generate(args.manifest, args.build_dir)
    return run_ninja(result.build_dir, [*args.passthrough, *args.names]).returncode
