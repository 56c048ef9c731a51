"""executor: graph.json + partition.json -> model.c, <model>.h and weights.S."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True)
    parser.add_argument("--graph", required=True)
    parser.add_argument("--partition", required=True)
    parser.add_argument(
        "--weights-path", required=True,
        help="weights.bin as the assembler finds it from the build dir (for .incbin)",
    )
    parser.add_argument("--source", required=True, help="model.c to write")
    parser.add_argument("--header", required=True, help="<model>.h to write")
    parser.add_argument("--asm", required=True, help="weights.S to write")
    parser.add_argument(
        "--isa-variants", action="append", metavar="KIND=LEVEL,...",
        help="a module compiled once per instruction-set level (best last)",
    )
    parser.add_argument("--pinned-isa", default="", help="the host's one ISA otherwise")
    parser.add_argument("--profile", action="store_true",
                        help="time each region of run (the host's `profile`)")


def outputs(args: argparse.Namespace) -> list[str]:
    return [args.source, args.header, args.asm]


def run(args: argparse.Namespace) -> Mapping[str, bytes | str]:
    from buildgen.codegen.executor import generate_executor
    from buildgen.codegen.isa import parse_isa_arguments
    from buildgen.ir.serialize import graph_digest, load_graph, weights_size
    from buildgen.stages.checks import load_checked_partition

    text = Path(args.graph).read_text()
    graph = load_graph(text)
    partition = load_checked_partition(args.partition, args.model, graph_digest(text))
    # The weights file's size follows from the graph, so weights.bin is not an input here:
    # new weight values re-run no executor.
    nbytes = weights_size(graph)
    isa = parse_isa_arguments(args.isa_variants, args.pinned_isa)
    sources = generate_executor(args.model, graph, partition, args.weights_path, nbytes, isa,
                                timed=args.profile)
    return {
        args.source: sources.source_c,
        args.header: sources.header,
        args.asm: sources.weights_asm,
    }
