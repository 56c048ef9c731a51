"""import: ONNX file + input shapes -> graph.json, weights.bin, constants.bin, a depfile.

The depfile lists every file the importer read (the .onnx and its external-data files),
so editing external data re-runs the import although build.ninja never named that file.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from buildgen.errors import error
from buildgen.stages.runner import depfile_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="the manifest's name for the model")
    parser.add_argument("--source", required=True, help="the ONNX file")
    parser.add_argument(
        "--input", action="append", default=[], metavar="NAME=D0,D1,...",
        help="fix an input's shape (repeatable); NAME= alone is a scalar",
    )
    parser.add_argument("--graph", required=True, help="graph.json to write")
    parser.add_argument("--weights", required=True, help="weights.bin to write")
    parser.add_argument("--constants", required=True,
                        help="constants.bin to write (the small weights, for codegen)")
    parser.add_argument("--depfile", required=True, help="depfile to write")


def outputs(args: argparse.Namespace) -> list[str]:
    return [args.graph, args.weights, args.constants, args.depfile]


def reads(args: argparse.Namespace) -> list[str]:
    from buildgen.importer.load import referenced_files

    return [str(path) for path in referenced_files(Path(args.source))]


def parse_input(text: str) -> tuple[str, tuple[int, ...]]:
    # rpartition: an input name may itself contain '='; the shape never does.
    name, sep, dims = text.rpartition("=")
    if not sep or not name:
        raise error(f"--input {text!r}: expected NAME=D0,D1,...")
    try:
        shape = tuple(int(d) for d in dims.split(",")) if dims else ()
    except ValueError:
        raise error(f"--input {text!r}: dimensions must be integers") from None
    return name, shape


def run(args: argparse.Namespace) -> Mapping[str, bytes | str]:
    from buildgen.importer import import_model
    from buildgen.ir.constants import constants_blob
    from buildgen.ir.serialize import dump_graph

    shapes = dict(parse_input(text) for text in args.input)
    result = import_model(Path(args.source), shapes, model_name=args.model)
    return {
        args.graph: dump_graph(result.graph),
        args.weights: result.weights_blob,
        args.constants: constants_blob(result.graph, result.weights_blob),
        args.depfile: depfile_text(args.graph, [str(p) for p in result.files_read]),
    }
