"""Timing a built kernel library with buildgen.runtime.

Each library is called until a batch takes about `min_seconds`; the fastest batch's time
per call is the measurement (other work on the machine only ever adds time, so the minimum
is the steadiest estimate). Calling through ctypes costs microseconds that a compiled
executor never pays, so the same measurement of a trivial kernel (one Relu of one
element, on the host) is subtracted from every result.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from buildgen.runtime import CompiledModel

BATCHES = 7
FLOOR_SECONDS = 1e-9  # a kernel faster than the call overhead still costs something


@dataclass(frozen=True)
class Timing:
    seconds: float  # time per call of the fastest batch
    runs: int  # calls measured


def inputs_for(model: CompiledModel, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for info in model.inputs:
        if info.dtype.kind == "f":
            arrays.append(rng.standard_normal(info.shape).astype(info.dtype))
        else:  # indices and masks: zeros are always in range
            arrays.append(np.zeros(info.shape, info.dtype))
    return arrays


def time_library(path: Path, model: str, min_seconds: float = 0.02) -> Timing:
    return time_alternating({"library": path}, model, BATCHES, min_seconds)["library"]


def time_alternating(libraries: Mapping[str, Path], model: str, rounds: int,
                     block_seconds: float) -> dict[str, Timing]:
    """Each library's time per call, all loaded at once and called in turns, a block of
    about `block_seconds` each, `rounds` times: drift on the machine reaches every library
    alike. The fastest block stands for each."""
    compiled = {name: CompiledModel(path, model) for name, path in libraries.items()}
    try:
        arrays = inputs_for(next(iter(compiled.values())))
        calls = {}
        for name, run in compiled.items():
            for _ in range(3):
                run(*arrays)
            start = time.perf_counter()
            run(*arrays)
            calls[name] = max(1, int(block_seconds / max(time.perf_counter() - start, 1e-7)))
        best = dict.fromkeys(compiled, float("inf"))
        for _ in range(rounds):
            for name, run in compiled.items():
                start = time.perf_counter()
                for _ in range(calls[name]):
                    run(*arrays)
                best[name] = min(best[name], (time.perf_counter() - start) / calls[name])
        return {name: Timing(best[name], calls[name] * rounds) for name in compiled}
    finally:
        for run in compiled.values():
            run.close()


@cache
def machine() -> str:
    """What measured the records: the CPU's model name and the architecture."""
    name = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return " ".join(filter(None, [name or platform.processor(), platform.machine()]))
