"""`buildgen build [-j N] [-k N] [-l N] [-n] [-v] [-d MODE] [names...] [-- ninja args]`: gen,
then ninja in the build dir, then a summary of what the action cache did.

ninja's everyday flags are build's own (ninja's meaning: `-v` is ninja's verbose, showing
command lines); anything else goes after `--`. Exit status: 0, 1 when the build failed,
130 when interrupted (tool.exit_status), as docs/cli.md says.

gen runs first unless its stamp (gen_stamp.py) shows that nothing it reads has changed
since it last ran, and ninja's generator rule re-runs it for what ninja tracks: a build
never runs against a build.ninja older than the manifest, and a no-op build costs about
what ninja's does.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from buildgen.errors import BuildgenError, Diagnostic
from buildgen.ninja.cli_common import add_manifest_arguments
from buildgen.ninja.gen_stamp import fresh_build_dir, write_stamp
from buildgen.ninja.tool import exit_status, run_ninja
from buildgen.term import color_enabled

# ninja options after which nothing is built: no summary then.
_NO_BUILD = ("-n", "-t", "--version", "-h", "--help")


def _add_ninja_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "ninja options", "passed to ninja as they are (-j8 or -j 8); others go after `--`"
    )
    group.add_argument("-j", "--jobs", type=int, metavar="N", help="run N jobs in parallel")
    group.add_argument("-k", dest="keep_going", type=int, metavar="N",
                       help="keep going until N jobs fail (0: no limit)")
    group.add_argument("-l", dest="load", type=float, metavar="N",
                       help="start no new job while the load average is above N")
    group.add_argument("-n", "--dry-run", action="store_true",
                       help="dry run: print what would run, run nothing")
    group.add_argument("-v", "--verbose", action="store_true",
                       help="show all command lines while building")
    group.add_argument("-d", dest="debug", metavar="MODE", action="append", default=[],
                       help="ninja debugging mode, e.g. explain (-d list lists them)")


def ninja_flags(args: argparse.Namespace) -> list[str]:
    """build's ninja options as ninja's own arguments."""
    flags: list[str] = []
    for flag, value in (("-j", args.jobs), ("-k", args.keep_going), ("-l", args.load)):
        if value is not None:
            flags += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    flags += ["-n"] * args.dry_run + ["-v"] * args.verbose
    for mode in args.debug:
        flags += ["-d", mode]
    return flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser)
    parser.add_argument(
        "names", nargs="*",
        help="what to build: a model, <model>-<target>, or an output path (default: all)",
    )
    _add_ninja_flags(parser)
    parser.epilog = "Arguments after `--` go to ninja, e.g. `buildgen build -- -t commands`."


def run(args: argparse.Namespace) -> int:
    from buildgen.cache import journal

    build_dir = fresh_build_dir(args.manifest, args.build_dir)
    if build_dir is None:
        from buildgen.ninja.context import start_probing

        probe = start_probing()  # as in cli_gen: while gen's modules import
        from buildgen.ninja.gen import generate

        build_dir = generate(args.manifest, args.build_dir, probe).build_dir
        write_stamp(args.manifest, args.build_dir, build_dir)
    cached, state, jobs = _prepare_cache(build_dir)
    offset = journal.journal_size(build_dir)
    if args.jobs is None and jobs is not None:
        args.jobs = jobs  # remote.jobs: actions on the executor's workers, not on our cores
    ninja_args = [*ninja_flags(args), *args.passthrough]
    code = exit_status(run_ninja(build_dir, [*ninja_args, *args.names]).returncode)
    if cached:
        from buildgen.cache.write_behind import wait_for_stores

        wait_for_stores(build_dir)  # the summary and the next build see every store
    # Without the cache, no action reports what it did: nothing to summarize.
    if cached and not _builds_nothing(ninja_args):
        _print_summary(build_dir, args.names, offset, state, stopped=code != 0)
    return code


def _builds_nothing(ninja_args: list[str]) -> bool:
    pairs = zip(ninja_args, [*ninja_args[1:], ""], strict=False)  # each with the next
    return any(a.startswith(_NO_BUILD) or a == "-dlist" or (a, b) == ("-d", "list")
               for a, b in pairs)


def _prepare_cache(build_dir: Path) -> tuple[bool, Path | None, int | None]:
    """Check the cache and executor settings before any action reads them; forget the
    previous build's remote trouble. Returns whether the cache is on, the remote clients'
    state folder if there is a remote cache or an executor, and the executor's -j."""
    from buildgen.cache.settings import REMOTE_STATE, SettingsError, load_settings

    try:
        settings = load_settings(build_dir)
    except SettingsError as exc:
        raise BuildgenError(Diagnostic(str(exc))) from None
    executor = settings.executor if settings.enabled else None
    if not settings.enabled or not (settings.remote or executor):
        return settings.enabled, None, None
    state = build_dir / REMOTE_STATE
    if settings.remote:
        from buildgen.cache.remote import RemoteCache, reset_remote_state

        RemoteCache.from_settings(settings.remote, settings.read_only, state)  # raises if wrong
        reset_remote_state(state)
    if executor is not None:
        from buildgen.remote.run import reset_executor_state

        reset_executor_state(state)
    return True, state, executor.jobs if executor is not None else None


def _print_summary(
    build_dir: Path, names: list[str], offset: int, state: Path | None, stopped: bool
) -> None:
    from buildgen.cache.journal import read_entries
    from buildgen.cache.summary import planned_actions, summarize

    warnings: list[str] = []
    if state is not None:
        from buildgen.cache.remote import remote_warnings
        from buildgen.remote.run import executor_warnings

        warnings = remote_warnings(state) + executor_warnings(state)
    summary = summarize(read_entries(build_dir, offset), planned_actions(build_dir, names))
    color = color_enabled(sys.stdout)
    print(os.linesep.join(summary.lines(warnings, stopped, color)), flush=True)
