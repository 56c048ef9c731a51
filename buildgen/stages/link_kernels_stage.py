"""link_kernels: a module's list of the fixed kernels sources it needs -> what its libraries
link (buildgen/ninja/shared_modules.py).

The codegen of a kind with fixed shared kernels (the c host) lists the kernels sources its
module's libraries need; this stage names their objects (each source once per ISA level,
in the toolchain's _shared/ folder, as gen's list for the target says) in

  - a ninja dyndep file adding them to the link and archive edges as inputs: ninja then
    compiles only the families some library needs, and
  - a response file, one object a line, which the link and `ar` read (`@file`) and the
    action cache hashes (buildgen.cache.action).

A stage of its own rather than more of codegen's outputs: the objects' folder follows the
compile flags, and codegen must not run again when only those change (`opt_level`).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from buildgen.errors import error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sources", required=True, help="the list codegen wrote")
    parser.add_argument("--dyndep", required=True, help="the dyndep file to write")
    parser.add_argument("--rsp", required=True, help="the response file to write")
    parser.add_argument("--edge", action="append", default=[], dest="edges",
                        help="a link or archive edge's output the objects go to (repeatable)")
    parser.add_argument("--objects", required=True,
                        help="the target's list of each source's objects (SOURCE=OBJECT lines)")


def outputs(args: argparse.Namespace) -> list[str]:
    return [args.dyndep, args.rsp]


def run(args: argparse.Namespace) -> Mapping[str, str]:
    from buildgen.ninja.dyndep import dyndep_text
    from buildgen.ninja.response_file import response_file_text

    wanted = {line for line in _read(args.sources).splitlines() if line}
    objects: list[str] = []
    known: set[str] = set()
    for pair in filter(None, _read(args.objects).splitlines()):
        source, _, obj = pair.partition("=")
        known.add(source)
        if source in wanted:
            objects.append(obj)
    if unknown := sorted(wanted - known):
        raise error(f"{args.sources}: no object for {', '.join(unknown)}",
                    hint="run `buildgen gen` again: its list predates these kernels")
    return {args.dyndep: dyndep_text([(edge, tuple(objects)) for edge in args.edges]),
            args.rsp: response_file_text(objects)}


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read the kernels list: {exc}") from None
