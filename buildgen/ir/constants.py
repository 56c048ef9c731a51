"""constants.bin: the weights small enough that code generation reads their values.

weights.bin holds every weight; codegen and the report read the values of small ones only
(a Reshape's shape, a Clip's bounds, a BatchNormalization's per-channel scale). The import
stage writes those again to constants.bin, and codegen and the report declare that file as
their input instead of weights.bin: editing a large weight (a Conv's filters) re-runs the
import, the weights' assembly and the link, never codegen. A stage that does read a large
weight gets it from weights.bin all the same, and names weights.bin in its depfile then
(`CodeWeights.files_read`), so nothing goes stale either way.

Layout: the small weights in graph order, each at a 64-byte-aligned offset, zero padding
between, nothing after the last; the offsets follow from the graph alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import error
from buildgen.ir.graph import Graph, Weight
from buildgen.ir.serialize import WEIGHT_ALIGNMENT, load_weights, numpy_dtype

if TYPE_CHECKING:
    import numpy as np

# A weight this size or smaller is a code constant: 16k floats, more than any shape, bound
# or per-channel vector; a matrix or a filter bank is larger.
LIMIT = 64 * 1024


def is_constant(weight: Weight) -> bool:
    return weight.type.nbytes <= LIMIT


def constant_offsets(graph: Graph) -> dict[str, int]:
    offsets: dict[str, int] = {}
    end = 0
    for weight in graph.weights:
        if is_constant(weight):
            start = -(-end // WEIGHT_ALIGNMENT) * WEIGHT_ALIGNMENT
            offsets[weight.name] = start
            end = start + weight.type.nbytes
    return offsets


def constants_size(graph: Graph) -> int:
    sizes = {w.name: w.type.nbytes for w in graph.weights}
    return max((at + sizes[name] for name, at in constant_offsets(graph).items()), default=0)


def constants_blob(graph: Graph, weights_blob: bytes) -> bytes:
    """constants.bin's bytes, cut from weights.bin's."""
    out = bytearray(constants_size(graph))
    by_name = {w.name: w for w in graph.weights}
    for name, at in constant_offsets(graph).items():
        weight = by_name[name]
        out[at : at + weight.type.nbytes] = weights_blob[
            weight.offset : weight.offset + weight.type.nbytes]
    return bytes(out)


class CodeWeights(Mapping[str, "np.ndarray"]):
    """Every weight of `graph` by name, read-only: small ones from constants.bin, large ones
    (rarely wanted at codegen) from weights.bin, whose reading `files_read` then reports."""

    def __init__(self, graph: Graph, constants_path: str, weights_path: str):
        self._graph = graph
        self._paths = (constants_path, weights_path)
        self._weights = {w.name: w for w in graph.weights}
        self._constants = _load_constants(graph, constants_path)
        self._large: dict[str, np.ndarray] | None = None

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self._constants:
            return self._constants[name]
        if name not in self._weights:
            raise KeyError(name)
        if self._large is None:
            self._large = load_weights(self._graph, self._paths[1])
        return self._large[name]

    def __contains__(self, name: object) -> bool:
        return name in self._weights  # without reading it

    def __iter__(self) -> Iterator[str]:
        return iter(self._weights)

    def __len__(self) -> int:
        return len(self._weights)

    def files_read(self) -> list[str]:
        """The files whose bytes the values given out came from (for the depfile)."""
        return [self._paths[0], *([self._paths[1]] if self._large is not None else [])]


def with_constants(graph: Graph, constants_path: str | os.PathLike[str]) -> Graph:
    """`graph` carrying its small weights' values from constants.bin (Graph.constant)."""
    return replace(graph, constant_values=_load_constants(graph, constants_path))


class LazyConstants(Mapping[str, "np.ndarray"]):
    """constants.bin, read when a value is first asked for. The partition stage carries
    these: most graphs' partitions never read a constant, and then constants.bin is not
    among the files the partition depends on, so new weight values re-run no partition."""

    def __init__(self, graph: Graph, path: str | os.PathLike[str]):
        self._graph = graph
        self.path = os.fspath(path)
        self._values: dict[str, np.ndarray] | None = None

    @property
    def read(self) -> bool:
        """Whether a value was asked for (the caller's depfile then names the file)."""
        return self._values is not None

    def _loaded(self) -> dict[str, np.ndarray]:
        if self._values is None:
            self._values = _load_constants(self._graph, self.path)
        return self._values

    def __getitem__(self, name: str) -> np.ndarray:
        return self._loaded()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())


def with_constants_from_weights(graph: Graph, weights_blob: bytes) -> Graph:
    """`graph` carrying its small weights' values, cut from weights.bin's bytes."""
    data = constants_blob(graph, weights_blob)
    return replace(graph, constant_values=_constant_arrays(graph, data, "<weights>"))


def _load_constants(graph: Graph, path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise error(f"{os.fspath(path)}: cannot read constants file: {exc.strerror or exc}"
                    ) from exc
    return _constant_arrays(graph, data, os.fspath(path))


def _constant_arrays(graph: Graph, data: bytes, where: str) -> dict[str, np.ndarray]:
    import numpy as np

    if len(data) != constants_size(graph):
        raise error(
            f"{where}: constants file has {len(data)} bytes but graph "
            f"'{graph.name}' expects {constants_size(graph)}",
            hint="the graph and constants files come from different imports; re-run the import",
        )
    buffer = np.frombuffer(data, dtype=np.uint8)
    arrays: dict[str, np.ndarray] = {}
    by_name = {w.name: w for w in graph.weights}
    for name, at in constant_offsets(graph).items():
        weight = by_name[name]
        raw = buffer[at : at + weight.type.nbytes]
        array = raw.view(numpy_dtype(weight.type.dtype)).reshape(weight.type.shape)
        array.flags.writeable = False
        arrays[name] = array
    return arrays
