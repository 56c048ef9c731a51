"""`buildgen tune --backend KIND`: measure one backend's own choices on this machine.

Some backends choose among variants of a call at codegen (CUTLASS instantiations and split-K
factors, cuDNN convolution algorithms, oneDNN's activation layout) and read those choices
from tuning records. Their kind's rules name a tuner (`tuning: {tuner: module:Class}`): for
each selected model and target holding the kind's regions it lists what to measure and
measures it, and the results merge into the records file, which later builds anywhere (CI
without a GPU) read through the backend's codegen.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Protocol

from buildgen.errors import error
from buildgen.fsutil import write_if_changed
from buildgen.partition.cli_support import Loaded
from buildgen.partition.cost.records import Records
from buildgen.partition.tune.programs import ProgramRunner, run_here
from buildgen.targets.model import ResolvedTarget


class BackendTuner(Protocol):
    def pending(self, loaded: Loaded, records: Records, build_dir: Path) -> tuple[int, int]:
        """(distinct problems, measurements not yet in `records`) of one model's regions."""
        ...

    def tune(self, loaded: Loaded, records: Records, build_dir: Path, machine: str, *,
             retune: bool, run: ProgramRunner = run_here) -> Records:
        """`records` with this model's measurements added: its profilers, built here, run
        by `run` (here, or on a worker with the target's GPU)."""
        ...


def tunable_kinds() -> list[str]:
    from buildgen.targets.registry import registered_kinds

    return sorted(name for name, kind in registered_kinds().items() if kind.tuner is not None)


def load_tuner(kind: str) -> BackendTuner:
    from buildgen.targets import get_kind

    spec = get_kind(kind).tuner
    if spec is None:
        raise error(f"kind {kind!r} has no tuner",
                    hint=f"kinds with one: {', '.join(tunable_kinds()) or 'none'}")
    module_name, _, attr = spec.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise error(f"kind {kind!r}: cannot load its tuner {spec!r}: {exc}") from exc
    tuner: BackendTuner = cls()
    return tuner


def gpu_name() -> str:
    """What measured the records, for people reading them: the GPU's name if nvidia-smi
    says it, with the CPU's."""
    from buildgen.partition.tune.measure import machine

    smi = shutil.which("nvidia-smi")
    name = ""
    if smi:
        done = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, check=False)
        name = done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout else ""
    return f"{name or 'GPU'} ({machine()})"


def profiler_runner(build_dir: Path, target: ResolvedTarget, kind: str, here: bool
                    ) -> tuple[ProgramRunner, str]:
    """Where the profilers run, and what the records say measured them: with an executor
    configured (and no --here), on its workers with the GPU the target names."""
    from buildgen.cache.settings import load_settings
    from buildgen.targets import get_kind
    from buildgen.targets.kinds import HOST_DEVICE

    if get_kind(kind).device == HOST_DEVICE:  # timed on this CPU, which builds (onednn)
        from buildgen.partition.tune.measure import machine

        return run_here, machine()
    executor = None if here else load_settings(build_dir).executor
    if executor is None:
        return run_here, gpu_name()
    from buildgen.remote.programs import RemoteProgramRunner

    # The kind's arch, else the cuda device's (which always has one: sm_80 by default).
    arch = target.instance(kind).as_dict().get("arch") or (
        target.device.as_dict().get("arch") if target.device is not None else "")
    runner = RemoteProgramRunner(executor, str(arch))
    return runner, runner.machine


def run_backend(args: argparse.Namespace, kind: str) -> int:
    from buildgen.partition.cli_support import load, prepare
    from buildgen.partition.cli_tune import records_path
    from buildgen.partition.cost.records import records_or_empty

    tuner = load_tuner(kind)
    gen, pairs = prepare(args, "partition")
    tuned = 0
    for pair in pairs:
        loaded = load(gen.build_dir, pair)
        if kind not in loaded.target.backends or loaded.partition is None:
            continue
        if not loaded.partition.regions_for(kind):
            continue
        path = records_path(args, loaded)
        records = records_or_empty(path)
        if args.dry_run:
            problems, todo = tuner.pending(loaded, records, gen.build_dir)
            print(f"{pair.model.name}/{pair.target}: {problems} distinct {kind} problems, "
                  f"{todo} measurements to make")
            continue
        run, machine = profiler_runner(gen.build_dir, loaded.target, kind, args.here)
        merged = tuner.tune(loaded, records, gen.build_dir, machine, retune=args.retune,
                            run=run)
        tuned += 1
        if write_if_changed(path, merged.dump()):
            print(f"wrote {path} ({len(merged.by_key) - len(records.by_key)} new records)")
    if not tuned and not args.dry_run:
        raise error(f"no selected model has a target with {kind} regions")
    sys.stdout.flush()
    return 0
