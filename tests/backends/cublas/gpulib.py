"""Helpers of the cublas and cudnn tests: the composite GPU target, the example models
partitioned for it, compiling a generated module with nvcc as a build would, and whether
this machine has a GPU to run anything on."""

from __future__ import annotations

import ctypes
import subprocess
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from cpulib_build import example_models

from buildgen.ir import Graph
from buildgen.partition.model import Partition
from buildgen.targets import ResolvedTarget, parse_target

GPU_TARGET: dict[str, Any] = {
    "kind": "composite", "host": {"kind": "c"}, "device": {"kind": "cuda", "arch": "sm_90"},
    "accelerators": [{"kind": "cudnn"}, {"kind": "cublas"}],
}


def gpu_target(**accelerator_attrs: Mapping[str, Any]) -> ResolvedTarget:
    """The composite target; `cublas={...}` / `cudnn={...}` add attributes."""
    spec = dict(GPU_TARGET)
    spec["accelerators"] = [{**a, **accelerator_attrs.get(a["kind"], {})}
                            for a in GPU_TARGET["accelerators"]]
    return parse_target(spec, "gpu")


@cache
def example(model: str) -> tuple[Graph, Mapping[str, np.ndarray], Partition]:
    """(graph, weights, partition for the GPU target) of an example model."""
    from buildgen.importer import import_model
    from buildgen.ir.serialize import load_weights
    from buildgen.partition.pipeline import make_partition

    source, inputs = example_models()[model]
    imported = import_model(source, {k: tuple(v) for k, v in inputs.items()})
    graph = imported.graph
    partition = make_partition(graph, gpu_target(), model, "digest")
    return graph, load_weights(graph, imported.weights_blob), partition


def ops_on(model: str, kind: str) -> list[str]:
    graph, _, partition = example(model)
    return [graph.node(n).op for r in partition.regions_for(kind) for n in r.nodes]


def compile_module(text: str, kind: str, folder: Path, name: str) -> Path:
    """`text` compiled to an object with the flags a build of the GPU target uses."""
    from buildgen.resources import include_dir
    from buildgen.targets.toolchain import toolchain_for

    toolchain = toolchain_for(gpu_target(), kind)
    source = folder / f"{name}.cu"
    source.write_text(text)
    obj = folder / f"{name}.o"
    cmd = [toolchain.cc, *toolchain.cflags, f"-I{include_dir()}", "-c", str(source), "-o",
           str(obj)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stderr[-4000:]}"
    assert "warning" not in done.stderr, done.stderr[-4000:]
    return obj


def defined_symbols(obj: Path) -> set[str]:
    done = subprocess.run(["nm", "--defined-only", "-g", str(obj)], capture_output=True,
                          text=True, check=True)
    return {line.split()[-1] for line in done.stdout.splitlines() if line.strip()}


@cache
def no_gpu_reason() -> str | None:
    """None when a CUDA device is usable here, else why not (for pytest.skip)."""
    from buildgen.backends.cuda_toolchain import find_toolkit

    try:
        toolkit = find_toolkit(None)
    except Exception as exc:  # noqa: BLE001 (any failure means: nothing to run on)
        return f"no CUDA toolkit: {exc}"
    libs = sorted(Path(toolkit.lib).glob("libcudart.so*"))
    if not libs:
        return f"no libcudart in {toolkit.lib}"
    try:
        cudart = ctypes.CDLL(str(libs[0]))
    except OSError as exc:
        return f"cannot load {libs[0]}: {exc}"
    count = ctypes.c_int(0)
    status = cudart.cudaGetDeviceCount(ctypes.byref(count))
    if status != 0 or count.value == 0:
        return f"no CUDA device (cudaGetDeviceCount returned {status}, {count.value} devices)"
    return None
