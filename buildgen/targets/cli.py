"""`buildgen targets [NAME...]` lists target kinds, their attributes and the tags;
`buildgen targets --show NAME [--manifest BUILD.yaml]` prints one resolved target in its
canonical form (the JSON gen writes to target.json)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import BuildgenError, error

if TYPE_CHECKING:
    from buildgen.targets.model import ResolvedTarget

DEFAULT_MANIFEST = Path("BUILD.yaml")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help="list only these kinds and tags"
    )
    parser.add_argument(
        "--show", metavar="NAME",
        help="print the resolved target NAME (a manifest target, a tag or a kind) as JSON",
    )
    parser.add_argument(
        "--manifest", type=Path, default=None,
        help=f"the manifest whose targets --show sees (default: {DEFAULT_MANIFEST} if present)",
    )


def run(args: argparse.Namespace) -> int:
    from buildgen.targets.listing import listing
    from buildgen.targets.registry import registered_kinds, registered_tags

    if args.show is None:
        if args.manifest is not None:
            raise BuildgenError("--manifest is only used with --show NAME")
        unknown = [n for n in args.names if n not in registered_kinds()
                   and n not in registered_tags()]
        if unknown:
            from buildgen.errors import error
            from buildgen.targets.attributes import did_you_mean

            known = [*registered_kinds(), *registered_tags()]
            raise error(f"no target kind or tag named {', '.join(map(repr, unknown))}",
                        hint=did_you_mean(unknown[0], known)
                        or f"`buildgen targets` lists them all: {', '.join(sorted(known))}")
        sys.stdout.write(listing(args.names))
        return 0
    if args.names:
        raise BuildgenError("--show takes one NAME; list names without --show")
    sys.stdout.write(_show(args.show, args.manifest).canonical_json())
    return 0


def _show(name: str, manifest_path: Path | None) -> ResolvedTarget:
    from buildgen.manifest import load_manifest
    from buildgen.targets.attributes import did_you_mean
    from buildgen.targets.manifest_targets import resolve_manifest_target
    from buildgen.targets.registry import registered_kinds, registered_tags
    from buildgen.targets.resolve import is_known_target, parse_target

    if manifest_path is None and DEFAULT_MANIFEST.is_file():
        manifest_path = DEFAULT_MANIFEST
    if manifest_path is None:
        if not is_known_target(name):
            raise error(
                f"no target kind or tag named {name!r} (and no manifest: give --manifest)",
                hint=did_you_mean(name, [*registered_kinds(), *registered_tags()]),
            )
        return parse_target(name, name)
    manifest = load_manifest(manifest_path, is_known_target)
    return resolve_manifest_target(manifest, name)
