"""Options shared by the subcommands that work on a manifest's build."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

DEFAULT_MANIFEST = "BUILD.yaml"


def add_manifest_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--manifest", type=Path, default=Path(DEFAULT_MANIFEST),
        help=f"the manifest (default: {DEFAULT_MANIFEST})",
    )
    parser.add_argument(
        "--build-dir", type=Path, default=None,
        help="where outputs go (default: the manifest's build_dir, else build/)",
    )


def resolve_build_dir(args: argparse.Namespace) -> Path:
    """The absolute build dir, symlinks resolved: --build-dir, else the manifest's (read only
    when needed). Checked as gen checks it (build_dir.py), except that a folder buildgen
    never wrote passes: the commands that ask (clean, trace) find nothing of ours there."""
    from buildgen.ninja.build_dir import checked_build_dir

    project = Path(os.path.abspath(args.manifest)).parent
    if args.build_dir is not None:
        return checked_build_dir(Path(os.path.abspath(args.build_dir)), project, writing=False)
    from buildgen.manifest import load_manifest
    from buildgen.targets import is_known_target

    return checked_build_dir(load_manifest(args.manifest, is_known_target).build_dir, project,
                             writing=False)
