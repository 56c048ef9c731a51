"""Load a compiled model library from Python and call it with numpy arrays.

    model = buildgen.runtime.load("build/mlp/cpu/libmlp.so")
    (y,) = model(x)            # or model.run({"x": x}) -> {"y": ...}

This is ctypes over the library's C API; the static tables in the library describe its
inputs and outputs, so nothing else needs to be read.
"""

from __future__ import annotations

import contextlib
import ctypes
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_LIB_NAME = re.compile(r"^lib(?P<model>[A-Za-z_][A-Za-z0-9_]*)\.so$")


class ModelError(RuntimeError):
    """A failure reported by the library through its last_error."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]


def _tensor_infos(lib: ctypes.CDLL, model: str, kind: str) -> tuple[TensorInfo, ...]:
    count = ctypes.c_int.in_dll(lib, f"{model}_num_{kind}s").value
    # Arrays are declared with at least one element, so size them from the count.
    names = (ctypes.c_char_p * max(count, 1)).in_dll(lib, f"{model}_{kind}_names")
    dtypes = (ctypes.c_char_p * max(count, 1)).in_dll(lib, f"{model}_{kind}_dtypes")
    ranks = (ctypes.c_int * max(count, 1)).in_dll(lib, f"{model}_{kind}_ranks")
    shapes = (ctypes.POINTER(ctypes.c_int64) * max(count, 1)).in_dll(lib, f"{model}_{kind}_shapes")
    infos = []
    for i in range(count):
        shape = tuple(shapes[i][d] for d in range(ranks[i]))
        name, dtype = names[i] or b"", dtypes[i] or b""
        infos.append(TensorInfo(name.decode(), np.dtype(dtype.decode()), shape))
    return tuple(infos)


class CompiledModel:
    """One instance of a compiled model (its own arena): not for concurrent calls."""

    def __init__(self, path: str | Path, model: str | None = None):
        path = Path(path)
        if model is None:
            match = _LIB_NAME.match(path.name)
            if not match:
                raise ValueError(f"cannot tell the model name from {path.name!r}; pass model=")
            model = match["model"]
        self.name = model
        self._lib = ctypes.CDLL(str(path.resolve()))
        self.inputs = _tensor_infos(self._lib, model, "input")
        self.outputs = _tensor_infos(self._lib, model, "output")
        self._run = self._lib[f"{model}_run"]
        self._run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self._run.restype = ctypes.c_int
        self._last_error = self._lib[f"{model}_last_error"]
        self._last_error.argtypes = [ctypes.c_void_p]
        self._last_error.restype = ctypes.c_char_p
        self._destroy = self._lib[f"{model}_destroy"]
        self._destroy.argtypes = [ctypes.c_void_p]
        create = self._lib[f"{model}_create"]
        create.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        create.restype = ctypes.c_int
        handle = ctypes.c_void_p()
        if create(ctypes.byref(handle)) != 0:
            raise ModelError(f"{model}_create failed: {self._error(None)}")
        self._handle: ctypes.c_void_p | None = handle
        cpu_isa = self._lib[f"{model}_cpu_isa"]
        cpu_isa.argtypes = [ctypes.c_void_p]
        cpu_isa.restype = ctypes.c_char_p
        # The instruction set create picked for the host code ("x86-64-v3"), or the one the
        # library was built for (its march), or "default".
        self.cpu_isa: str = (cpu_isa(handle) or b"").decode()

    def _error(self, handle: ctypes.c_void_p | None) -> str:
        message = self._last_error(handle)
        return message.decode(errors="replace") if message else "(no message)"

    def _prepare(self, info: TensorInfo, array: object) -> np.ndarray:
        # Not np.ascontiguousarray: it turns a 0-d array (a scalar input) into shape (1,).
        arr = np.asarray(array, dtype=info.dtype, order="C")
        if arr.shape != info.shape:
            raise ValueError(f"input {info.name!r}: expected shape {info.shape}, got {arr.shape}")
        return arr

    def __call__(self, *arrays: object) -> tuple[np.ndarray, ...]:
        if len(arrays) != len(self.inputs):
            raise ValueError(f"{self.name} takes {len(self.inputs)} inputs, got {len(arrays)}")
        if self._handle is None:
            raise ModelError(f"{self.name}: the model was closed")
        ins = [self._prepare(info, a) for info, a in zip(self.inputs, arrays, strict=True)]
        outs = [np.empty(info.shape, info.dtype) for info in self.outputs]
        in_ptrs = (ctypes.c_void_p * max(len(ins), 1))(*(a.ctypes.data for a in ins))
        out_ptrs = (ctypes.c_void_p * max(len(outs), 1))(*(a.ctypes.data for a in outs))
        if self._run(self._handle, in_ptrs, out_ptrs) != 0:
            raise ModelError(f"{self.name}_run failed: {self._error(self._handle)}")
        return tuple(outs)

    def run(self, feeds: Mapping[str, object]) -> dict[str, np.ndarray]:
        missing = [i.name for i in self.inputs if i.name not in feeds]
        if missing:
            raise ValueError(f"{self.name}: missing inputs {missing}")
        results = self(*(feeds[i.name] for i in self.inputs))
        return {info.name: value for info, value in zip(self.outputs, results, strict=True)}

    @property
    def input_names(self) -> Sequence[str]:
        return [i.name for i in self.inputs]

    @property
    def output_names(self) -> Sequence[str]:
        return [o.name for o in self.outputs]

    def close(self) -> None:
        if self._handle is not None:
            self._destroy(self._handle)
            self._handle = None

    def __del__(self) -> None:
        # At interpreter shutdown ctypes may already be gone.
        with contextlib.suppress(Exception):
            self.close()


def load(path: str | Path, model: str | None = None) -> CompiledModel:
    return CompiledModel(path, model)
