"""`buildgen cmake --manifest M --build-dir B [--model m]... [--target t]...`.

buildgen_add_models() runs it at configure time. It writes the option files and the CMake
fragment into the build dir, then prints the fragment's folder (the only thing on stdout),
which the CMake function adds with add_subdirectory().
"""

from __future__ import annotations

import argparse

from buildgen.cmake.generate import generate_cmake
from buildgen.ninja.cli_common import add_manifest_arguments
from buildgen.targets.cross import ProjectToolchain


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
    cross = parser.add_argument_group(
        "cross builds", "what buildgen_add_models passes when CMAKE_CROSSCOMPILING is set: "
        "the models' targets whose host names no triple build for this toolchain")
    cross.add_argument("--cross-triple", metavar="TRIPLE",
                       help="the triple CMake's compiler builds for (aarch64-linux-gnu)")
    cross.add_argument("--cross-cc", metavar="CC", help="CMAKE_C_COMPILER")
    cross.add_argument("--cross-sysroot", metavar="DIR", help="CMAKE_SYSROOT")
    cross.add_argument("--cross-emulator", action="append", metavar="ARG",
                       help="one item of CMAKE_CROSSCOMPILING_EMULATOR (repeatable; write "
                       "--cross-emulator=-L for an item starting with -)")
    parser.epilog = (
        "Used by buildgen_add_models() in CMake; `buildgen --cmake-dir` prints the folder "
        "holding buildgen's CMake package."
    )


def run(args: argparse.Namespace) -> int:
    result = generate_cmake(args.manifest, args.build_dir, args.model, args.target,
                            project_toolchain(args))
    print(result.fragment_dir)
    return 0


def project_toolchain(args: argparse.Namespace) -> ProjectToolchain | None:
    if not args.cross_triple:
        return None
    compiler = f"CMAKE_C_COMPILER {args.cross_cc}" if args.cross_cc else "CMAKE_CXX_COMPILER"
    return ProjectToolchain(
        triple=args.cross_triple,
        cc=args.cross_cc or None,
        sysroot=args.cross_sysroot or None,
        emulator=tuple(args.cross_emulator) if args.cross_emulator else None,
        origin=f"the CMake toolchain ({compiler})",
        leave_out=" (buildgen_add_models(... TARGETS <others>))",
    )
