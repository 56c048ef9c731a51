"""codegen: one backend's source module (all of its regions) for one model and target.

gen knows every backend of a target, so build.ninja holds one codegen action per backend;
a backend given no region still writes a valid, empty module. That keeps the graph static:
nothing about the partition's result changes which actions exist.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from buildgen.errors import BuildgenError, error, in_file
from buildgen.stages.runner import depfile_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True)
    parser.add_argument("--backend", required=True, help="the backend kind, e.g. c")
    parser.add_argument("--graph", required=True)
    parser.add_argument("--constants", required=True, help="constants.bin (small weights)")
    parser.add_argument("--weights", required=True,
                        help="weights.bin, read only for a large weight (then in the depfile)")
    parser.add_argument("--depfile", help="the depfile to write: the weight files read")
    parser.add_argument("--partition", required=True)
    parser.add_argument("--options", required=True, help="options/<backend>.json")
    parser.add_argument("--out", required=True, help="the source file to write")
    # A kind with `shared_kernels:` rules (buildgen/ninja/shared_modules.py) also writes the
    # list of kernel instantiations its module calls.
    parser.add_argument("--kernels-out", help="the instantiation list to write")
    # A kind with fixed shared kernels (the c host's families) also writes which of their
    # sources its libraries link (link_kernels_stage turns that into the link's inputs).
    parser.add_argument("--kernels-linked", help="the list of kernels sources to write")
    # A kind with `tuning:` rules reads the model's tuning records (its generate takes
    # `records=`).
    parser.add_argument("--records", help="tuning records choosing kernels per shape")


def outputs(args: argparse.Namespace) -> list[str]:
    return [args.out, *([args.kernels_out] if args.kernels_out else []),
            *([args.kernels_linked] if args.kernels_linked else []),
            *([args.depfile] if args.depfile else [])]


def reads(args: argparse.Namespace) -> list[str]:
    return [args.weights, *([args.records] if args.records else [])]


def run(args: argparse.Namespace) -> Mapping[str, bytes | str]:
    from buildgen.backends.registry import get_backend
    from buildgen.ir.constants import CodeWeights
    from buildgen.ir.serialize import graph_digest, load_graph
    from buildgen.ninja.layout import SOURCE_EXTENSIONS
    from buildgen.ninja.options_file import load_options
    from buildgen.partition.cost.records import optional_records
    from buildgen.stages.checks import load_checked_partition

    kind, options = load_options(args.options)
    if kind != args.backend:
        raise error(f"{args.options}: options of backend {kind!r}, expected {args.backend!r}")
    text = Path(args.graph).read_text()
    graph = load_graph(text)
    partition = load_checked_partition(args.partition, args.model, graph_digest(text))
    weights = CodeWeights(graph, args.constants, args.weights)
    backend = get_backend(kind)
    produced: dict[str, bytes | str] = {}
    records = optional_records(args.records)
    try:
        if args.kernels_out:
            # Backends declaring shared_kernels implement generate_with_kernels.
            source, listing = backend.generate_with_kernels(  # type: ignore[attr-defined]
                args.model, graph, partition, options, weights, records)
            produced[args.kernels_out] = listing
        elif records is not None:
            # Backends declaring `tuning:` take the records.
            source = backend.generate(  # type: ignore[call-arg]
                args.model, graph, partition, options, weights, records=records)
        else:
            source = backend.generate(args.model, graph, partition, options, weights)
    except BuildgenError as exc:  # say which model: a backend's message names only a node
        raise in_file(exc, graph.source or args.graph) from exc
    # build.ninja named the file (and picked its compile rule) from the backend's declared
    # language at gen time; a backend producing something else must not slip through.
    expected = SOURCE_EXTENSIONS.get(source.language)
    if expected is None or not args.out.endswith(f".{expected}"):
        raise error(
            f"backend {kind!r} generated {source.filename!r} ({source.language}), "
            f"but the build expects {Path(args.out).name!r}",
            hint=f"check the language declared in rules/{kind}.yaml",
        )
    produced[args.out] = source.text
    if args.kernels_linked:
        produced[args.kernels_linked] = _linked_sources(kind, source.text)
    if args.depfile:
        produced[args.depfile] = depfile_text(args.out, weights.files_read())
    return produced


def _linked_sources(kind: str, text: str) -> str:
    """The fixed kernels sources the module's libraries link, one name a line."""
    from buildgen.targets import get_kind
    from buildgen.targets.shared_kernels import linked_by

    spec = get_kind(kind).shared_kernels
    if spec is None or not spec.fixed:
        raise error(f"--kernels-linked: kind {kind!r} has no fixed shared kernels")
    return "".join(f"{source.name}\n" for source in linked_by(spec, text))
