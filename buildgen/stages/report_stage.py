"""report: target + graph + constants + partition -> report.json and report.md."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True)
    parser.add_argument("--target", required=True, help="a target file (options/target.json)")
    parser.add_argument("--graph", required=True)
    parser.add_argument("--constants", required=True, help="constants.bin (small weights)")
    parser.add_argument("--weights", required=True,
                        help="weights.bin, read only for a large weight (then in the depfile)")
    parser.add_argument("--depfile", help="the depfile to write: the weight files read")
    parser.add_argument("--partition", required=True)
    parser.add_argument("--json", required=True, help="report.json to write")
    parser.add_argument("--md", required=True, help="report.md to write")
    parser.add_argument("--isa-variants", action="append", metavar="KIND=LEVEL,...",
                        help="a module compiled once per instruction-set level (best last)")
    parser.add_argument("--pinned-isa", default="", help="the host's one ISA otherwise")
    # What a backend's codegen chooses from its options and tuning records (onednn's layout)
    # changes the memory its module plans.
    parser.add_argument("--options", action="append", default=[],
                        help="a backend's options file (options/<kind>.json); repeated")
    parser.add_argument("--records", help="the tuning records the target's codegen reads")


def outputs(args: argparse.Namespace) -> list[str]:
    return [args.json, args.md, *([args.depfile] if args.depfile else [])]


def reads(args: argparse.Namespace) -> list[str]:
    return [args.weights]


def run(args: argparse.Namespace) -> Mapping[str, bytes | str]:
    from buildgen.codegen.isa import parse_isa_arguments
    from buildgen.codegen.report import write_report
    from buildgen.ir.constants import CodeWeights
    from buildgen.ir.serialize import graph_digest, load_graph
    from buildgen.ninja.options_file import load_options
    from buildgen.partition.cost.records import optional_records
    from buildgen.stages.checks import load_checked_partition
    from buildgen.stages.runner import depfile_text
    from buildgen.targets import load_target_file

    text = Path(args.graph).read_text()
    graph = load_graph(text)
    partition = load_checked_partition(args.partition, args.model, graph_digest(text))
    target = load_target_file(args.target)
    weights = CodeWeights(graph, args.constants, args.weights)
    isa = parse_isa_arguments(args.isa_variants, args.pinned_isa)
    options = dict(load_options(path) for path in args.options)
    records = optional_records(args.records)
    json_text, markdown = write_report(args.model, target, graph, partition, weights, isa,
                                       options, records)
    produced = {args.json: json_text, args.md: markdown}
    if args.depfile:
        produced[args.depfile] = depfile_text(args.json, weights.files_read())
    return produced
