"""`buildgen build [names...] [-- ninja args]`: gen, then ninja in the build dir, then a
summary of what the action cache did.

gen runs first unless its stamp (gen_stamp.py) shows that nothing it reads has changed
since it last ran, and ninja's generator rule re-runs it for what ninja tracks: a build
never runs against a build.ninja older than the manifest, and a no-op build costs about
what ninja's does.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from buildgen.errors import BuildgenError, Diagnostic
from buildgen.ninja.cli_common import add_manifest_arguments
from buildgen.ninja.gen_stamp import fresh_build_dir, write_stamp
from buildgen.ninja.tool import run_ninja

# ninja options after which nothing is built: no summary then.
_NO_BUILD = ("-n", "-t", "--version", "-h", "--help")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_manifest_arguments(parser)
    parser.add_argument(
        "names", nargs="*",
        help="what to build: a model, <model>-<target>, or an output path (default: all)",
    )
    parser.epilog = "Arguments after `--` go to ninja, e.g. `buildgen build -- -j4 -k0`."


def run(args: argparse.Namespace) -> int:
    from buildgen.cache import journal

    build_dir = fresh_build_dir(args.manifest, args.build_dir)
    if build_dir is None:
        from buildgen.ninja.gen import generate

        build_dir = generate(args.manifest, args.build_dir).build_dir
        write_stamp(args.manifest, args.build_dir, build_dir)
    cached, state = _prepare_cache(build_dir)
    offset = journal.journal_size(build_dir)
    code = run_ninja(build_dir, [*args.passthrough, *args.names]).returncode
    # Without the cache, no action reports what it did: nothing to summarize.
    if cached and not any(a.startswith(_NO_BUILD) for a in args.passthrough):
        _print_summary(build_dir, args.names, offset, state, stopped=code != 0)
    return code


def _prepare_cache(build_dir: Path) -> tuple[bool, Path | None]:
    """Check the cache settings before any action reads them; forget the previous build's
    remote-cache trouble. Returns whether the cache is on, and the remote client's state
    folder if there is a remote."""
    from buildgen.cache.settings import REMOTE_STATE, SettingsError, load_settings

    try:
        settings = load_settings(build_dir)
    except SettingsError as exc:
        raise BuildgenError(Diagnostic(str(exc))) from None
    if not settings.enabled or not settings.remote:
        return settings.enabled, None
    from buildgen.cache.remote import RemoteCache, reset_remote_state

    state = build_dir / REMOTE_STATE
    RemoteCache.from_settings(settings.remote, settings.read_only, state)  # raises if wrong
    reset_remote_state(state)
    return True, state


def _print_summary(
    build_dir: Path, names: list[str], offset: int, state: Path | None, stopped: bool
) -> None:
    from buildgen.cache.journal import read_entries
    from buildgen.cache.summary import planned_actions, summarize

    warnings: list[str] = []
    if state is not None:
        from buildgen.cache.remote import remote_warnings

        warnings = remote_warnings(state)
    summary = summarize(read_entries(build_dir, offset), planned_actions(build_dir, names))
    print(os.linesep.join(summary.lines(warnings, stopped)), flush=True)
