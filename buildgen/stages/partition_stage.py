"""partition: graph.json, constants.bin + the target (+ pins, records, a user's partition)
-> partition.json.

The priority policy reads the target's partition view (options/target.json); the cost
policy reads the whole target.json, since every option that changes a kernel's speed is
part of a tuning record's key. Files it reads besides those named on the command line
(a step's module) go to a depfile, so editing them re-runs the partition; so does
constants.bin, when a backend asked for a constant's value (Resize scales): then, and only
then, a new weight value re-runs the partition.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from buildgen.errors import error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True)
    parser.add_argument("--target", required=True, help="target file (options/target.json)")
    parser.add_argument("--graph", required=True)
    parser.add_argument(
        "--constants", help="constants.bin: backends may decline a node for its constant "
        "inputs; read only if one asks, and then named in the depfile"
    )
    parser.add_argument(
        "--pin", action="append", default=[], metavar="PATTERN=BACKEND",
        help="a node (or pattern) the named backend must run (repeatable)",
    )
    parser.add_argument("--policy", default="priority", choices=("priority", "cost"))
    parser.add_argument("--records", help="tuning records for the cost policy")
    parser.add_argument("--partition-file", help="a partition file to start from")
    parser.add_argument("--step", help="module:function rewriting the partition")
    parser.add_argument(
        "--step-path", action="append", default=[],
        help="folder searched first for the step's module (repeatable)",
    )
    parser.add_argument("--depfile", help="depfile listing the step's module file")
    parser.add_argument(
        "--rules-digest", help="digest of the target's pattern tables (re-runs on change)"
    )
    parser.add_argument("--out", required=True, help="partition.json to write")


def outputs(args: argparse.Namespace) -> list[str]:
    return [args.out, *([args.depfile] if args.depfile else [])]


def reads(args: argparse.Namespace) -> list[str] | None:
    if args.step:  # a module of the user's, and whatever it imports
        return None
    return [path for path in (args.constants, args.records, args.partition_file) if path]


def parse_pin(text: str) -> tuple[str, str]:
    # rpartition: node names may contain '='; backend kinds never do.
    pattern, sep, backend = text.rpartition("=")
    if not sep or not pattern or not backend:
        raise error(f"--pin {text!r}: expected PATTERN=BACKEND")
    return pattern, backend


def run(args: argparse.Namespace) -> Mapping[str, bytes | str]:
    from buildgen.ir.constants import LazyConstants
    from buildgen.ir.serialize import graph_digest, load_graph
    from buildgen.partition.cost.records import optional_records
    from buildgen.partition.custom import load_step, load_user_partition
    from buildgen.partition.pipeline import PartitionOptions, make_partition
    from buildgen.partition.serialize import dump_partition
    from buildgen.stages.runner import depfile_text
    from buildgen.targets import load_target_file

    step = load_step(args.step, args.step_path) if args.step else None
    options = PartitionOptions(
        pins=tuple(parse_pin(p) for p in args.pin),
        policy=args.policy,
        records=optional_records(args.records),
        start=load_user_partition(args.partition_file) if args.partition_file else (),
        start_origin=f"partition file {Path(args.partition_file).name}"
        if args.partition_file else "",
        step=step,
        step_name=args.step or "",
    )
    text = Path(args.graph).read_text()
    graph = load_graph(text)
    constants = LazyConstants(graph, args.constants) if args.constants else None
    if constants is not None:
        graph = replace(graph, constant_values=constants)
    target = load_target_file(args.target)
    partition = make_partition(graph, target, args.model, graph_digest(text), options)
    result: dict[str, bytes | str] = {args.out: dump_partition(partition)}
    if args.depfile:
        module = sys.modules.get((args.step or "").partition(":")[0])
        files = [module.__file__] if module is not None and module.__file__ else []
        if constants is not None and constants.read:
            files.append(constants.path)
        result[args.depfile] = depfile_text(args.out, files)
    return result
