"""`buildgen tune [models...] [--target T] [--records FILE]`: measure candidate kernels.

For each selected model and target it lists every candidate kernel the cost policy would
weigh, builds each one not yet in the records file as a small library through the real
pipeline, times it on this machine, and merges the results into the records file (by
default the one the model's `partition: {records: ...}` names). A kernel shared by several
models or targets is measured once; a second run measures nothing new.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import error
from buildgen.fsutil import write_if_changed
from buildgen.partition.cli_support import Loaded, add_selection_arguments, load, prepare

if TYPE_CHECKING:
    import numpy as np


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_selection_arguments(parser)
    parser.add_argument("--records", type=Path,
                        help="the records file to write (default: each model's "
                             "partition.records from the manifest)")
    parser.add_argument("--retune", action="store_true",
                        help="measure kernels that already have a record again")
    parser.add_argument("--min-time", type=float, default=0.02, metavar="SECONDS",
                        help="length of each timed batch (default 0.02)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                        help="parallel kernel builds")
    parser.add_argument("--dry-run", action="store_true",
                        help="list the kernels that would be measured, build nothing")
    parser.add_argument("--here", action="store_true",
                        help="with --backend and an executor configured: run the profilers "
                             "on this machine, not on the executor's workers with the "
                             "target's GPU")
    parser.add_argument("--backend", metavar="KIND",
                        help="measure one backend's own choices on this machine's device "
                             "instead: cutlass (CUTLASS instantiations and split-K factors), "
                             "cudnn (convolution algorithms) or onednn (the activation "
                             "layout, for activation_layout: auto); see "
                             "buildgen/partition/tune/backend_cli.py")


def records_path(args: argparse.Namespace, loaded: Loaded) -> Path:
    if args.records is not None:
        return Path(os.path.abspath(args.records))
    path = loaded.pair.model.partition.records
    if path is None:
        raise error(f"model {loaded.pair.model.name!r} names no tuning-records file",
                    hint="pass --records FILE, or set `partition: {policy: cost, records: "
                         "FILE}` on the model")
    return path


def run(args: argparse.Namespace) -> int:
    from buildgen.ir.serialize import load_weights
    from buildgen.partition.cost.records import records_or_empty
    from buildgen.partition.tune.kernels import Kernel, collect_kernels
    from buildgen.partition.tune.run import TuneSettings, measure, pending

    if args.backend:
        from buildgen.partition.tune.backend_cli import run_backend

        return run_backend(args, args.backend)
    gen, pairs = prepare(args, "graph")
    by_file: dict[Path, list[Kernel]] = defaultdict(list)
    weights_paths: dict[str, Path] = {}
    for pair in pairs:
        loaded = load(gen.build_dir, pair, partition=False)
        where = f"{pair.model.name}/{pair.target}"
        kernels = collect_kernels(loaded.graph, loaded.target, pair.model.pins, where)
        by_file[records_path(args, loaded)].extend(kernels)
        weights_paths[pair.model.name] = gen.build_dir / pair.graph_files.weights
    settings = TuneSettings(gen.build_dir / "tune", args.min_time, args.jobs, args.retune)

    def weights_of(kernel: Kernel) -> Mapping[str, np.ndarray]:
        model = kernel.where.split("/", 1)[0]
        return load_weights(kernel.graph, weights_paths[model])

    for path, kernels in sorted(by_file.items()):
        records = records_or_empty(path)
        todo = pending(kernels, records, args.retune)
        distinct = len({k.key for k in kernels})
        print(f"{path.name}: {distinct} distinct kernels, {distinct - len(todo)} already "
              f"measured, {len(todo)} to measure")
        if args.dry_run:
            for kernel in todo:
                print(f"  {kernel.describe()}   ({kernel.where})")
            continue
        new = measure(todo, weights_of, settings, lambda line: print(line, flush=True))
        if write_if_changed(path, records.merged(new).dump()):
            print(f"wrote {path}")
    sys.stdout.flush()
    return 0
