"""The `buildgen` command: main(argv) -> exit status. The only place errors are printed.

Subcommands live in their own modules, listed in SUBCOMMANDS; each provides
`add_arguments(parser)` and `run(args) -> int`. Only the chosen one is imported, so
`buildgen --help` and quick commands stay fast. To add a subcommand, add a row.
all_parsers() builds every parser (for shell completion and the docs' CLI reference).

Exit status (docs/cli.md): 0 ok, 1 an error (bad input, a failed build), 2 a usage error
(argparse's), 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from buildgen import __version__
from buildgen.errors import STORAGE_ERRNOS, BuildgenError, os_error
from buildgen.term import color_enabled


@dataclass(frozen=True)
class Subcommand:
    module: str
    help: str
    passthrough: bool = False  # takes arguments after `--` (args.passthrough)


SUBCOMMANDS: dict[str, Subcommand] = {
    "init": Subcommand(
        "buildgen.manifest.init", "add an ONNX model to the manifest (or write one)"
    ),
    "gen": Subcommand("buildgen.ninja.cli_gen", "write build.ninja from the manifest"),
    "build": Subcommand(
        "buildgen.ninja.cli_build", "gen, then ninja [names...] [-j N -k N -n -v] [-- args]", True
    ),
    "clean": Subcommand("buildgen.ninja.cli_clean", "remove what the build wrote"),
    "run": Subcommand(
        "buildgen.run.cli", "build a model, run it on inputs (an .npz or random), --compare"
    ),
    "profile": Subcommand(
        "buildgen.run.profile_cli", "time each region of a model built with profile: true"
    ),
    "targets": Subcommand(
        "buildgen.targets.cli", "list target kinds, attributes and tags; --show one target"
    ),
    "explain": Subcommand(
        "buildgen.partition.cli_explain", "why each region of a model runs on its backend"
    ),
    "report": Subcommand(
        "buildgen.partition.cli_report", "build, then write report.html + partition.svg"
    ),
    "tune": Subcommand(
        "buildgen.partition.cli_tune", "measure candidate kernels into a tuning-records file"
    ),
    "cache": Subcommand("buildgen.cache.cli", "action cache: `stats` or `clean`"),
    "cmake": Subcommand(
        "buildgen.cmake.cli", "write the CMake fragment (buildgen_add_models runs it)"
    ),
    "trace": Subcommand(
        "buildgen.ninja.cli_trace", "the last build's .ninja_log as a Chrome/Perfetto trace"
    ),
    "completion": Subcommand(
        "buildgen.completion", "print a shell completion script: bash, zsh or fish"
    ),
}


class CommandModule(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...
    def run(self, args: argparse.Namespace) -> int: ...


class _PrintCMakeDir(argparse.Action):
    """Like --version: prints and exits, whatever else is on the command line."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from buildgen.resources import cmake_dir

        print(cmake_dir())
        parser.exit()


def _top_parser() -> argparse.ArgumentParser:
    width = max(map(len, SUBCOMMANDS))
    commands = "\n".join(f"  {name:<{width}} {sub.help}" for name, sub in SUBCOMMANDS.items())
    parser = argparse.ArgumentParser(
        prog="buildgen",
        description="Compile ONNX models ahead of time into native libraries through Ninja.",
        epilog=f"commands:\n{commands}\n\n`buildgen <command> --help` describes one.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"buildgen {__version__}")
    parser.add_argument(
        "--cmake-dir", action=_PrintCMakeDir,
        help="print the folder of buildgen's CMake package (for -Dbuildgen_DIR= or "
        "CMAKE_PREFIX_PATH) and exit",
    )
    parser.add_argument(
        "-C", dest="directory", metavar="DIR", action="append", default=[],
        help="change to DIR before anything else (like make and ninja)",
    )
    parser.add_argument("command", choices=list(SUBCOMMANDS), metavar="command")
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Split before argparse, which would drop the `--` and mix the two halves.
    passthrough: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1 :]
    top = _top_parser().parse_args(argv)
    sub = SUBCOMMANDS[top.command]
    rest: list[str] = top.args
    args = argparse.Namespace()
    start = os.getcwd() if top.directory else ""
    try:
        _change_directory(top.directory)
        parser, module = _subcommand(top.command)
        args = _parse(parser, rest)
        if passthrough and not sub.passthrough:
            parser.error("takes no arguments after '--'")
        args.passthrough = passthrough
        return module.run(args)
    except BuildgenError as exc:
        print(exc.render(color_enabled(sys.stderr)), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: said like an error, the traceback in a crash report
        if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
            print(os_error(exc).render(color_enabled(sys.stderr)), file=sys.stderr)
            return 1
        internal = _internal_error(exc, top.command, args)
        print(internal.render(color_enabled(sys.stderr)), file=sys.stderr)
        return 1
    finally:
        if top.directory:  # main() may be called in-process (tests, the docs)
            with contextlib.suppress(OSError):
                os.chdir(start)


def _change_directory(directories: list[str]) -> None:
    for directory in directories:  # each relative to the one before, as with make
        try:
            os.chdir(directory)
        except OSError as exc:
            reason = "no such directory" if isinstance(exc, FileNotFoundError) else (
                "not a directory" if isinstance(exc, NotADirectoryError) else exc.strerror)
            raise BuildgenError(f"-C {directory}: {reason}") from None


def _subcommand(name: str) -> tuple[argparse.ArgumentParser, CommandModule]:
    """The subcommand's module and its fully built parser; builds nothing else."""
    sub = SUBCOMMANDS[name]
    parser = argparse.ArgumentParser(prog=f"buildgen {name}", description=sub.help)
    module: CommandModule = importlib.import_module(sub.module)
    module.add_arguments(parser)
    return parser, module


def all_parsers() -> dict[str, argparse.ArgumentParser]:
    """The top parser under "" and each subcommand's parser under its name, in SUBCOMMANDS
    order: what shell completion and the docs' CLI reference are generated from."""
    parsers = {"": _top_parser()}
    for name in SUBCOMMANDS:
        parsers[name] = _subcommand(name)[0]
    return parsers


def _parse(parser: argparse.ArgumentParser, rest: list[str]) -> argparse.Namespace:
    """Options and positionals in any order (`build mlp -j8 cnn`), where argparse can."""
    try:
        return parser.parse_intermixed_args(rest)
    except TypeError:  # a parser with REMAINDER or subparsers: no intermixing there
        return parser.parse_args(rest)


def _internal_error(exc: Exception, command: str, args: argparse.Namespace) -> BuildgenError:
    """The crash report goes to the build dir when the command has one, else here."""
    from pathlib import Path

    from buildgen.crash import internal_error

    folder = Path.cwd()
    if hasattr(args, "manifest") and hasattr(args, "build_dir"):
        from buildgen.ninja.cli_common import resolve_build_dir

        with contextlib.suppress(Exception):  # the manifest may be what is broken
            folder = resolve_build_dir(args)
    model = getattr(args, "model", None)
    what = f"`buildgen {command}`" + (f" (model '{model}')" if isinstance(model, str) else "")
    return internal_error(exc, what=what, source=None, folder=folder, name=f"buildgen-{command}")
