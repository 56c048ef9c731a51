"""`buildgen cmake --manifest M --build-dir B [--model m]... [--target t]...`.

buildgen_add_models() runs it at configure time. It writes the option files and the CMake
fragment into the build dir, then prints the fragment's folder (the only thing on stdout),
which the CMake function adds with add_subdirectory().
"""

from __future__ import annotations

import argparse

from buildgen.cmake.generate import generate_cmake
from buildgen.ninja.cli_common import add_manifest_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser)
    parser.add_argument(
        "--model", action="append", default=[], metavar="NAME",
        help="make targets for this model only (repeatable; default: every model)",
    )
    parser.add_argument(
        "--target", action="append", default=[], metavar="NAME",
        help="make targets for this target only (repeatable; default: every target)",
    )
    parser.epilog = (
        "Used by buildgen_add_models() in CMake; `buildgen --cmake-dir` prints the folder "
        "holding buildgen's CMake package."
    )


def run(args: argparse.Namespace) -> int:
    result = generate_cmake(args.manifest, args.build_dir, args.model, args.target)
    print(result.fragment_dir)
    return 0
