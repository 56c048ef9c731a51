"""`buildgen gen [--manifest BUILD.yaml] [--build-dir DIR]`."""

from __future__ import annotations

import argparse

from buildgen.ninja.cli_common import add_manifest_arguments
from buildgen.ninja.gen import generate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser)


def run(args: argparse.Namespace) -> int:
    generate(args.manifest, args.build_dir)
    return 0
