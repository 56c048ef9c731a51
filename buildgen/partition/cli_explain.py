"""`buildgen explain MODEL [--target T] [--json]`: each region, its backend, its nodes and why.

The partition comes from the build itself (gen, then ninja for partition.json), so what is
explained is exactly what gets built.
"""

from __future__ import annotations

import argparse
import json

from buildgen.partition.cli_support import add_selection_arguments, load, prepare


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_selection_arguments(parser, one=True)
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args: argparse.Namespace) -> int:
    from buildgen.partition.cost.records import model_records
    from buildgen.partition.explain import explain, render_text, to_json

    gen, pairs = prepare(args, "partition")
    texts, docs = [], []
    for pair in pairs:
        loaded = load(gen.build_dir, pair)
        assert loaded.partition is not None
        expl = explain(loaded.graph, loaded.target, loaded.partition,
                       model_records(pair.model.partition.records))
        texts.append(render_text(expl))
        docs.append(to_json(expl))
    if args.json:
        print(json.dumps(docs if len(docs) != 1 else docs[0], indent=1, sort_keys=True))
    else:
        print("\n".join(texts), end="")
    return 0
