"""What the cutlass tests share: the target of the issue, the example models, and the
backend's outputs for them (cached: importing and partitioning take seconds)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from buildgen import stages
from buildgen.backends.cutlass import CutlassBackend
from buildgen.partition.cost.records import Records
from buildgen.partition.model import Partition
from buildgen.targets import ResolvedTarget

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "models"
INPUTS = {"mlp": {"x": [8, 512]}, "cnn": {"image": [1, 3, 32, 32]},
          "encoder": {"x": [1, 128, 256]}}


def target(**cutlass: Any) -> ResolvedTarget:
    """{host: c, device: {kind: cuda, arch: sm_90}, accelerators: [cutlass]} with the
    given cutlass attributes."""
    return stages.resolve_target({
        "kind": "composite", "host": {"kind": "c"},
        "device": {"kind": "cuda", "arch": "sm_90"},
        "accelerators": [{"kind": "cutlass", **cutlass}],
    })


@cache
def model(name: str) -> stages.ImportedModel:
    return stages.import_model(EXAMPLES / f"{name}.onnx", INPUTS[name])


@cache
def partition(name: str) -> Partition:
    """The partition for the default target; the backend's choices are made at codegen, so
    the attribute tests reuse it."""
    return stages.partition(model(name).graph, target(), model=name)


def generate(name: str, records: Records | None = None, **cutlass: Any) -> tuple[str, str]:
    """(glue module text, instantiation list) of model `name` with these attributes."""
    t = target(**cutlass)
    imported = model(name)
    source, listing = CutlassBackend().generate_with_kernels(
        name, imported.graph, partition(name), t.codegen_options("cutlass"),
        imported.weights(), records)
    return source.text, listing


def no_gpu_reason() -> str | None:
    """None when a CUDA device is usable here, else why not (for pytest.skip)."""
    import ctypes

    from buildgen.backends.cuda_toolchain import find_toolkit

    try:
        lib = Path(find_toolkit(None).lib)
    except Exception as exc:  # noqa: BLE001 (any failure means: nothing to run on)
        return f"no CUDA toolkit: {exc}"
    found = sorted(lib.glob("libcudart.so*"))
    if not found:
        return f"no libcudart in {lib}"
    try:
        cudart = ctypes.CDLL(str(found[0]))
    except OSError as exc:
        return f"cannot load {found[0]}: {exc}"
    count = ctypes.c_int(0)
    status = cudart.cudaGetDeviceCount(ctypes.byref(count))
    if status != 0 or count.value == 0:
        return f"no CUDA device (cudaGetDeviceCount returned {status}, {count.value} devices)"
    return None
