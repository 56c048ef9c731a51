"""`buildgen tune`'s work: build each kernel not yet measured, time it, merge the records.

Kernels are built through the same stages as a model (buildgen.stages.api: the backend's
codegen, the host executor, the target's compilers), compiled in parallel, then timed one
at a time so compiles never disturb a measurement.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from buildgen.partition.cost.records import Record, Records
from buildgen.partition.tune.kernels import Kernel, kernel_model, kernel_partition
from buildgen.partition.tune.measure import FLOOR_SECONDS, machine, time_library
from buildgen.targets import parse_target

Report = Callable[[str], None]


@dataclass(frozen=True)
class TuneSettings:
    work_dir: Path  # kernels are built in <work_dir>/<key digest>/
    min_seconds: float = 0.02  # per timed batch
    jobs: int = os.cpu_count() or 1
    retune: bool = False  # measure kernels that already have a record


def pending(kernels: Sequence[Kernel], records: Records, retune: bool) -> list[Kernel]:
    """Distinct kernels (by key) still to measure, in a stable order."""
    distinct: dict[str, Kernel] = {}
    for kernel in kernels:
        distinct.setdefault(kernel.key, kernel)
    todo = [k for k in distinct.values() if retune or k.key not in records.by_key]
    return sorted(todo, key=lambda k: (k.backend, k.describe(), k.key))


def _build(kernel: Kernel, weights: Mapping[str, np.ndarray], work: Path) -> Path:
    from buildgen.stages.api import build_library

    model = kernel_model(kernel, weights)
    # Every candidate links the c host's shared kernels compiled once, in the work folder.
    return build_library(work / kernel.digest, "kernel", model, kernel_partition(kernel, model),
                         kernel.target, kernels_dir=work / "_shared")


def _baseline(settings: TuneSettings) -> float:
    """Seconds one call costs through the runtime, measured on a one-element Relu."""
    from buildgen.ir import DType, Graph, Node, TensorType, Value
    from buildgen.partition.model import Partition, Region
    from buildgen.stages.api import ImportedModel, build_library

    t = TensorType(DType.FLOAT32, (1,))
    graph = Graph("baseline", (Value("x", t),), (Value("y", t),),
                  (Node("relu", "Relu", ("x",), ("y",)),), (Value("x", t), Value("y", t)),
                  (), 17)
    model = ImportedModel(graph, b"")
    host = parse_target("c")
    part = Partition("kernel", "c", model.digest, (Region("r0", "c", ("relu",)),))
    library = build_library(settings.work_dir / "baseline", "kernel", model, part, host,
                            kernels_dir=settings.work_dir / "_shared")
    return time_library(library, "kernel", settings.min_seconds).seconds


def measure(
    kernels: Sequence[Kernel], weights_of: Callable[[Kernel], Mapping[str, np.ndarray]],
    settings: TuneSettings, report: Report,
) -> list[Record]:
    """Build every kernel (in parallel), then time them one by one."""
    if not kernels:
        return []
    with ThreadPoolExecutor(max_workers=max(1, settings.jobs)) as pool:
        libraries = list(pool.map(
            lambda k: _build(k, weights_of(k), settings.work_dir), kernels
        ))
    overhead = _baseline(settings)
    report(f"call overhead through the runtime: {overhead * 1e6:.2f} us (subtracted)")
    records = []
    for kernel, library in zip(kernels, libraries, strict=True):
        timing = time_library(library, "kernel", settings.min_seconds)
        seconds = max(timing.seconds - overhead, FLOOR_SECONDS)
        report(f"  {seconds * 1e6:10.2f} us  {kernel.describe()}")
        records.append(Record(kernel.key, seconds, timing.runs, machine()))
    return records
