"""`buildgen run MODEL [--target T] [--inputs in.npz] [--output out.npz] [--compare]`: build
the model's library for one target (as `buildgen build MODEL-T` would: nothing is rebuilt
when up to date), run it through the generated driver (driver.py) on the inputs of an .npz
file or on random ones drawn from --seed, print one line per output, write them to an .npz,
and with --compare check them against onnxruntime. Exit status 1 when they differ by more
than --rtol/--atol, as for any error."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import BuildgenError, Diagnostic

if TYPE_CHECKING:
    import numpy as np

    from buildgen.ir import Graph
    from buildgen.ninja.gen import GenResult
    from buildgen.partition.cli_support import Pair
    from buildgen.run.execute import Ran
    from buildgen.run.tensors import TensorSpec
    from buildgen.targets import ResolvedTarget


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from buildgen.run.compare import ATOL, RTOL

    add_input_arguments(parser)
    parser.add_argument("--output", type=Path, metavar="NPZ",
                        help="write the outputs here, keyed by output name")
    parser.add_argument("--repeat", type=_positive, default=1, metavar="N",
                        help="run N times and print the mean time of one run (default: 1)")
    parser.add_argument("--compare", action="store_true",
                        help="also run onnxruntime on the same inputs here and print the "
                        "largest errors; exit 1 beyond --rtol/--atol")
    parser.add_argument("--rtol", type=float, default=RTOL,
                        help=f"relative tolerance of --compare (default: {RTOL:g})")
    parser.add_argument("--atol", type=float, default=ATOL,
                        help=f"absolute tolerance of --compare, near zero (default: {ATOL:g})")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """The manifest, the model, its target and its inputs: what `run` and `profile` share."""
    from buildgen.ninja.cli_common import add_manifest_arguments

    add_manifest_arguments(parser)
    parser.add_argument("model", help="a model of the manifest")
    parser.add_argument("--target", help="one of the model's targets (default: its first)")
    parser.add_argument("--inputs", type=Path, metavar="NPZ",
                        help="an .npz with one array per input, keyed by input name "
                        "(default: random inputs from --seed)")
    parser.add_argument("--seed", type=int, default=0,
                        help="the seed of random inputs: floats in [0, 1), integers in "
                        "[0, 2) (default: 0)")


@dataclass(frozen=True)
class Prepared:
    """A model's library brought up to date for one target, its driver compiled, and the
    inputs to run it on."""

    build_dir: Path
    pair: Pair
    target: ResolvedTarget
    graph: Graph
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    feeds: dict[str, np.ndarray]
    origin: str  # where the inputs came from, for the summary line
    prefix: tuple[str, ...]  # the emulator, () to run directly

    def execute(self, repeat: int) -> tuple[Ran, dict[str, np.ndarray]]:
        """Run the driver `repeat` times; its timing and the last run's outputs."""
        from buildgen.run import tensors
        from buildgen.run.driver import DriverBuild
        from buildgen.run.execute import run_driver

        binary = DriverBuild(self.build_dir, self.pair.files).binary
        with tempfile.TemporaryDirectory(prefix="buildgen-run-") as scratch:
            given, got = Path(scratch) / "inputs.bin", Path(scratch) / "outputs.bin"
            tensors.write_raw(given, self.inputs, self.feeds)
            ran = run_driver(binary, self.prefix, given, got, repeat, self.pair.files.label)
            return ran, tensors.read_raw(got, self.outputs)


def prepare(args: argparse.Namespace) -> Prepared:
    from buildgen.ir.serialize import load_graph
    from buildgen.partition.cli_support import bring_up_to_date, select
    from buildgen.run import tensors
    from buildgen.run.driver import DriverBuild, ensure_driver
    from buildgen.run.execute import compile_only, emulator_for, no_emulator
    from buildgen.targets import load_target_file

    gen = _generate(args)
    pair = select(gen, [args.model], args.target)[0]  # without --target: the first
    bring_up_to_date(gen.build_dir, [pair.files.phony])
    graph = load_graph((gen.build_dir / pair.graph_files.graph).read_text())
    inputs, outputs = tensors.graph_specs(graph)
    if args.inputs is not None:
        feeds, origin = tensors.load_inputs(args.inputs, inputs), str(args.inputs)
    else:
        feeds, origin = tensors.random_inputs(inputs, args.seed), f"random, seed {args.seed}"
    target = load_target_file(gen.build_dir / pair.files.target_file)
    compile_only(target, pair.files.label)
    prefix = emulator_for(target)
    if prefix is None:  # before compiling: the driver could not run anyway
        raise no_emulator(pair.files.label)
    ensure_driver(DriverBuild(gen.build_dir, pair.files), target)
    return Prepared(gen.build_dir, pair, target, graph, tuple(inputs), tuple(outputs),
                    dict(feeds), origin, tuple(prefix))


def run(args: argparse.Namespace) -> int:
    from buildgen.run import tensors

    if args.rtol < 0 or args.atol < 0:
        raise BuildgenError("--rtol and --atol must not be negative")
    prepared = prepare(args)
    ran, results = prepared.execute(args.repeat)
    how = f" under {' '.join(prepared.prefix)}" if prepared.prefix else ""
    print(f"{prepared.pair.files.label}: inputs {prepared.origin}; "
          f"{_timing(ran.runs, ran.seconds)}{how}{_isa(ran.isa)}")
    for spec in prepared.outputs:
        print(f"  {tensors.summary(spec, results[spec.name])}")
    if args.output is not None:
        tensors.save_npz(args.output, results)
        print(f"wrote {args.output}")
    sys.stdout.flush()
    if args.compare:
        return _compare(prepared.pair.model.source, prepared.feeds, prepared.outputs, results,
                        args.rtol, args.atol)
    return 0


def _generate(args: argparse.Namespace) -> GenResult:
    from buildgen.ninja.gen import generate

    return generate(args.manifest, args.build_dir)


def _isa(isa: str) -> str:
    """The host code's instruction set, where create picked or checked one."""
    return f"; isa {isa}" if isa and isa != "default" else ""


def _timing(runs: int, seconds: float) -> str:
    each = seconds / runs * 1e3
    return f"{runs} runs, {each:.3f} ms each" if runs > 1 else f"ran in {each:.3f} ms"


def _compare(model: Path, feeds: Mapping[str, np.ndarray], outputs: Sequence[TensorSpec],
             results: Mapping[str, np.ndarray], rtol: float, atol: float) -> int:
    from buildgen.run.compare import compare, onnxruntime_outputs

    theirs = onnxruntime_outputs(model, feeds, outputs)
    print(f"compared with onnxruntime (rtol {rtol:g}, atol {atol:g}):")
    differences = [compare(s.name, results[s.name], theirs.get(s.name), rtol, atol)
                   for s in outputs]
    for difference in differences:
        print(f"  {difference.line()}")
    bad = [d.name for d in differences if not d.ok]
    if bad:
        sys.stdout.flush()
        raise BuildgenError(Diagnostic(
            f"{len(bad)} of {len(differences)} outputs differ from onnxruntime's beyond "
            f"the tolerance: {', '.join(bad)}"))
    return 0
