"""The `buildgen` command: main(argv) -> exit status. The only place errors are printed.

Subcommands live in their own modules, listed in SUBCOMMANDS; each provides
`add_arguments(parser)` and `run(args) -> int`. Only the chosen one is imported, so
`buildgen --help` and quick commands stay fast. To add a subcommand, add a row.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from buildgen import __version__
from buildgen.errors import BuildgenError


@dataclass(frozen=True)
class Subcommand:
    module: str
    help: str
    passthrough: bool = False  # takes arguments after `--` (args.passthrough)


SUBCOMMANDS: dict[str, Subcommand] = {
    "gen": Subcommand("buildgen.ninja.cli_gen", "write build.ninja from the manifest"),
    "build": Subcommand(
        "buildgen.ninja.cli_build", "gen, then run ninja [names...] [-- ninja args]", True
    ),
    "clean": Subcommand("buildgen.ninja.cli_clean", "remove what the build wrote"),
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
    commands = "\n".join(f"  {name:<8} {sub.help}" for name, sub in SUBCOMMANDS.items())
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
    parser = argparse.ArgumentParser(prog=f"buildgen {top.command}", description=sub.help)
    args = argparse.Namespace()
    try:
        module: CommandModule = importlib.import_module(sub.module)
        module.add_arguments(parser)
        args = parser.parse_args(rest)
        if passthrough and not sub.passthrough:
            parser.error("takes no arguments after '--'")
        args.passthrough = passthrough
        return module.run(args)
    except BuildgenError as exc:
        print(exc.render(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: said like an error, the traceback in a crash report
        print(_internal_error(exc, top.command, args).render(), file=sys.stderr)
        return 1


def _internal_error(exc: Exception, command: str, args: argparse.Namespace) -> BuildgenError:
    """The crash report goes to the build dir when the command has one, else here."""
    import contextlib
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
