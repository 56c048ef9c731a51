"""What `buildgen explain`, `report` and `tune` share: pick models and targets of a
manifest, bring their files up to date through the build itself, and read them."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from buildgen.errors import BuildgenError, error
from buildgen.ir import Graph
from buildgen.manifest import ModelSpec
from buildgen.ninja.gen import GenResult, generate
from buildgen.ninja.layout import ModelFiles, TargetFiles
from buildgen.ninja.tool import run_ninja
from buildgen.partition.model import Partition
from buildgen.targets import ResolvedTarget


@dataclass(frozen=True)
class Pair:
    """One model built for one of its targets, with its files (relative to the build dir)."""

    model: ModelSpec
    target: str

    @property
    def files(self) -> TargetFiles:
        return TargetFiles(self.model.name, self.target)

    @property
    def graph_files(self) -> ModelFiles:
        return ModelFiles(self.model.name)


@dataclass(frozen=True)
class Loaded:
    pair: Pair
    graph: Graph
    target: ResolvedTarget  # the whole resolved target (target.json)
    partition: Partition | None


def add_selection_arguments(parser: argparse.ArgumentParser, *, one: bool = False) -> None:
    from buildgen.ninja.cli_common import add_manifest_arguments

    add_manifest_arguments(parser)
    if one:
        parser.add_argument("model", help="a model of the manifest")
    else:
        parser.add_argument("models", nargs="*", help="models of the manifest (default: all)")
    parser.add_argument("--target", help="one of the model's targets (default: all of them)")


def select(gen: GenResult, models: Sequence[str], target: str | None) -> list[Pair]:
    known = {m.name: m for m in gen.manifest.models}
    pairs: list[Pair] = []
    for name in models or sorted(known):
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            raise error(f"no model {name!r} in {gen.manifest.path.name}",
                        hint=f"did you mean {close[0]!r}?" if close else None)
        spec = known[name]
        if target is not None and target not in spec.targets:
            raise error(f"model {name!r} is not built for target {target!r}; its targets: "
                        f"{', '.join(spec.targets)}")
        pairs += [Pair(spec, t) for t in spec.targets if target in (None, t)]
    return pairs


def bring_up_to_date(build_dir: Path, outputs: Sequence[str]) -> None:
    """Run the build for exactly these outputs (and what they need)."""
    if not outputs:
        return
    done = run_ninja(build_dir, list(outputs), capture=True)
    if done.returncode != 0:
        # ninja's own output (the failing action's errors) only matters when it fails;
        # otherwise it would mix with what the command prints.
        sys.stderr.write(done.stdout + done.stderr)
        raise BuildgenError("the build stopped before the files needed here were made "
                            "(its errors are above)")


def prepare(args: argparse.Namespace, outputs_of: str) -> tuple[GenResult, list[Pair]]:
    """gen, then the selected pairs; `outputs_of` is "graph", "partition" or "all"."""
    gen = generate(args.manifest, args.build_dir)
    names = [args.model] if hasattr(args, "model") else args.models
    pairs = select(gen, names, args.target)
    wanted: list[str] = []
    for pair in pairs:
        if outputs_of == "graph":
            wanted.append(pair.graph_files.graph)
        elif outputs_of == "partition":
            wanted.append(pair.files.partition)
        else:
            wanted.append(pair.files.phony)
    bring_up_to_date(gen.build_dir, list(dict.fromkeys(wanted)))
    return gen, pairs


def load(build_dir: Path, pair: Pair, *, partition: bool = True) -> Loaded:
    from buildgen.ir.constants import with_constants
    from buildgen.ir.serialize import load_graph
    from buildgen.partition.serialize import load_partition
    from buildgen.targets import load_target_file

    graph = load_graph((build_dir / pair.graph_files.graph).read_text())
    graph = with_constants(graph, build_dir / pair.graph_files.constants)
    target = load_target_file(build_dir / pair.files.target_file)
    part = load_partition(build_dir / pair.files.partition) if partition else None
    return Loaded(pair, graph, target, part)
