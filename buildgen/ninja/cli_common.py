"""Options shared by the subcommands that work on a manifest's build."""

from __future__ import annotations

import argparse
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
