"""`buildgen tune --cutlass`: profile the CUTLASS candidates of each model's cutlass calls
on this machine's GPU and merge the records into the tuning-records file, which later
builds anywhere (CI without a GPU) read through the cutlass codegen."""

from __future__ import annotations

import argparse
import sys

from buildgen.errors import error
from buildgen.fsutil import write_if_changed


def run_cutlass(args: argparse.Namespace) -> int:
    from buildgen.backends.cutlass.tune import cutlass_jobs, tune_target
    from buildgen.partition.cli_support import load, prepare
    from buildgen.partition.cli_tune import _records_path
    from buildgen.partition.cost.records import empty_records, load_records
    from buildgen.partition.tune.measure import machine

    gen, pairs = prepare(args, "partition")
    tuned = 0
    for pair in pairs:
        loaded = load(gen.build_dir, pair)
        if "cutlass" not in loaded.target.backends or loaded.partition is None:
            continue
        path = _records_path(args, loaded)
        records = load_records(path) if path.exists() else empty_records(path.name)
        if args.dry_run:
            problems = cutlass_jobs(loaded.graph, loaded.partition, loaded.target)
            todo = sum(1 for jobs in problems for j in jobs if j.key not in records.by_key)
            print(f"{pair.model.name}/{pair.target}: {len(problems)} distinct CUTLASS "
                  f"problems, {todo} candidates to profile")
            continue
        merged = tune_target(loaded.graph, loaded.partition, loaded.target, records,
                             gen.build_dir, f"{machine()} (GPU)", retune=args.retune)
        tuned += 1
        if write_if_changed(path, merged.dump()):
            print(f"wrote {path} ({len(merged.by_key) - len(records.by_key)} new records)")
    if not tuned and not args.dry_run:
        raise error("no selected model has a target with cutlass regions")
    sys.stdout.flush()
    return 0
