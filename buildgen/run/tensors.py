"""The tensors of `buildgen run`: inputs from an .npz file or drawn from a seed, the raw
files the driver reads and writes, and one line of statistics per tensor."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from buildgen.errors import BuildgenError, Diagnostic
from buildgen.fsutil import write_atomic
from buildgen.ir import Graph, Value

# Random integer inputs are drawn from [0, INT_HIGH): 0 and 1 are valid token ids,
# indices and class labels for any model that takes them.
INT_HIGH = 2


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]

    @classmethod
    def of(cls, value: Value) -> TensorSpec:
        return cls(value.name, np.dtype(value.type.dtype.value), tuple(value.type.shape))

    def describe(self) -> str:
        return f"{self.name}: {self.dtype.name}[{', '.join(map(str, self.shape))}]"


def specs(values: Sequence[Value]) -> tuple[TensorSpec, ...]:
    return tuple(TensorSpec.of(v) for v in values)


def graph_specs(graph: Graph) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    return specs(graph.inputs), specs(graph.outputs)


def random_inputs(inputs: Sequence[TensorSpec], seed: int) -> dict[str, np.ndarray]:
    """Floats uniform in [0, 1), integers in [0, INT_HIGH), booleans either; the same seed
    draws the same values on every machine (numpy's PCG64)."""
    rng = np.random.default_rng(seed)
    drawn: dict[str, np.ndarray] = {}
    for spec in inputs:
        if spec.dtype.kind == "f":
            drawn[spec.name] = rng.random(spec.shape, dtype=np.float64).astype(spec.dtype)
        else:
            drawn[spec.name] = rng.integers(0, INT_HIGH, spec.shape).astype(spec.dtype)
    return drawn


def load_inputs(path: Path, inputs: Sequence[TensorSpec]) -> dict[str, np.ndarray]:
    """The model's inputs from an .npz, keyed by input name; each cast to the input's dtype
    when numpy calls that safe or same-kind (float64 to float32), else an error."""
    arrays = _read_npz(path)
    expected = "; ".join(s.describe() for s in inputs) or "(none)"
    names = [s.name for s in inputs]
    missing = [n for n in names if n not in arrays]
    extra = [k for k in arrays if k not in names]
    if missing or extra:
        said = ([f"missing {', '.join(map(repr, missing))}"] if missing else []) + (
            [f"unknown {', '.join(map(repr, extra))}"] if extra else [])
        raise BuildgenError(Diagnostic(f"{path}: {'; '.join(said)}",
                                       hint=f"the model's inputs are {expected}"))
    feeds: dict[str, np.ndarray] = {}
    for spec in inputs:
        array = arrays[spec.name]
        if array.shape != spec.shape or not np.can_cast(array.dtype, spec.dtype, "same_kind"):
            got = f"{array.dtype.name}[{', '.join(map(str, array.shape))}]"
            raise BuildgenError(Diagnostic(
                f"{path}: input {spec.name!r} is {got}, expected {spec.describe()}",
                hint=f"the model's inputs are {expected}"))
        feeds[spec.name] = np.ascontiguousarray(array, dtype=spec.dtype).reshape(spec.shape)
    return feeds


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError("a single .npy array, not an .npz")
        with data:
            return {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise BuildgenError(f"{path}: no such file") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise BuildgenError(Diagnostic(
            f"{path}: not a readable .npz file ({exc})",
            hint="write one with numpy.savez(path, **{input_name: array})")) from None


def write_raw(path: Path, inputs: Sequence[TensorSpec], feeds: Mapping[str, np.ndarray]) -> None:
    """The driver's INPUTS file: each input's bytes in the model's order, no header."""
    path.write_bytes(b"".join(feeds[s.name].tobytes(order="C") for s in inputs))


def read_raw(path: Path, outputs: Sequence[TensorSpec]) -> dict[str, np.ndarray]:
    data = path.read_bytes()
    sizes = [int(np.prod(s.shape, dtype=np.int64)) * s.dtype.itemsize for s in outputs]
    if len(data) != sum(sizes):
        raise BuildgenError(f"the driver wrote {len(data)} bytes of outputs, "
                            f"expected {sum(sizes)}")
    result: dict[str, np.ndarray] = {}
    offset = 0
    for spec, size in zip(outputs, sizes, strict=True):
        chunk = np.frombuffer(data, spec.dtype, size // spec.dtype.itemsize, offset)
        result[spec.name] = chunk.reshape(spec.shape).copy()
        offset += size
    return result


def save_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """What np.savez writes (np.load reads it), built in memory and written atomically, so
    a crash leaves no half file. Not np.savez itself: an output named `file` would clash
    with its parameter. Fixed member dates keep the same outputs the same bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            member = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with archive.open(member, "w", force_zip64=True) as out:
                np.lib.format.write_array(out, np.asanyarray(array), allow_pickle=False)
    write_atomic(path, buffer.getvalue())


def summary(spec: TensorSpec, array: np.ndarray) -> str:
    """`name  float32[8, 10]  min .. max .. mean ..`: enough to see a tensor is sane."""
    head = f"{spec.name}  {spec.dtype.name}[{', '.join(map(str, spec.shape))}]"
    if array.size == 0:
        return f"{head}  (empty)"
    values = array.astype(np.float64)
    stats = f"min {values.min():.6g}  max {values.max():.6g}  mean {values.mean():.6g}"
    nan = int(np.isnan(values).sum())
    return f"{head}  {stats}" + (f"  ({nan} NaN)" if nan else "")
