"""partition: graph.json + the target's code-affecting view -> partition.json."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from buildgen.errors import error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True)
    parser.add_argument("--target", required=True, help="target file (options/target.json)")
    parser.add_argument("--graph", required=True)
    parser.add_argument(
        "--pin", action="append", default=[], metavar="PATTERN=BACKEND",
        help="a node (or pattern) the named backend must run (repeatable)",
    )
    parser.add_argument("--policy", default="priority", choices=("priority", "cost"))
    parser.add_argument("--records", help="tuning records for the cost policy")
    parser.add_argument("--partition-file", help="a partition file to use")
    parser.add_argument("--out", required=True, help="partition.json to write")


def outputs(args: argparse.Namespace) -> list[str]:
    return [args.out]


def parse_pin(text: str) -> tuple[str, str]:
    # rpartition: node names may contain '='; backend kinds never do.
    pattern, sep, backend = text.rpartition("=")
    if not sep or not pattern or not backend:
        raise error(f"--pin {text!r}: expected PATTERN=BACKEND")
    return pattern, backend


def run(args: argparse.Namespace) -> Mapping[str, bytes | str]:
    from buildgen.ir.serialize import graph_digest, load_graph
    from buildgen.partition import partition_graph
    from buildgen.partition.serialize import dump_partition
    from buildgen.targets import load_target_file

    pins = [parse_pin(p) for p in args.pin]
    unsupported = [
        what
        for what, given in (
            ("pins", bool(pins)),
            (f"policy {args.policy!r}", args.policy != "priority"),
            ("tuning records", args.records is not None),
            ("a partition file", args.partition_file is not None),
        )
        if given
    ]
    if unsupported:
        # Refuse rather than build something other than what the manifest asks for.
        raise error(
            f"model {args.model!r}: this buildgen's partitioner does not support "
            + ", ".join(unsupported)
        )
    text = Path(args.graph).read_text()
    graph = load_graph(text)
    target = load_target_file(args.target)
    partition = partition_graph(graph, target, args.model, graph_digest(text))
    return {args.out: dump_partition(partition)}
