"""`buildgen gen [--manifest BUILD.yaml] [--build-dir DIR]`."""

from __future__ import annotations

import argparse

from buildgen.ninja.cli_common import add_manifest_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser)


def run(args: argparse.Namespace) -> int:
    # The probe (a child interpreter) first, so that it runs while gen's modules import.
    from buildgen.ninja.context import start_probing

    probe = start_probing()
    from buildgen.ninja.gen import generate

    generate(args.manifest, args.build_dir, probe)
    return 0
