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
    """The absolute build dir: --build-dir, else the manifest's (read only when needed)."""
    if args.build_dir is not None:
        return Path(os.path.abspath(args.build_dir))
    from buildgen.manifest import load_manifest
    from buildgen.targets import is_known_target

    return load_manifest(args.manifest, is_known_target).build_dir
