"""Read an ONNX file, and the external-data files its initializers point to.

The external files are listed so that the import stage can write a depfile: ninja then
re-imports when a weights file changes even though the .onnx file did not.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.errors import error
from buildgen.limits import NODES, check_external_data, check_model_file

if TYPE_CHECKING:
    import numpy as np
    import onnx


@dataclass(frozen=True)
class LoadedModel:
    model: onnx.ModelProto
    files_read: tuple[Path, ...]  # the .onnx file first, then external-data files, sorted
    opset: int  # the default-domain opset version


def load_onnx(path: Path) -> LoadedModel:
    import onnx
    from onnx.external_data_helper import load_external_data_for_model

    try:
        check_model_file(path)  # outside the next `except Exception`: its own message
    except OSError as exc:
        raise error(f"{path}: cannot read ONNX file: {exc.strerror or exc}") from exc
    try:
        model = onnx.load(os.fspath(path), load_external_data=False)
    except OSError as exc:
        raise error(f"{path}: cannot read ONNX file: {exc.strerror or exc}") from exc
    except Exception as exc:  # protobuf's DecodeError and friends: not an ONNX file
        raise error(f"{path}: not a valid ONNX model: {exc}") from exc

    _check_text(model, path)
    NODES.check(_count_nodes(model.graph), f"{path}: nodes")
    external = _external_files(path, model)
    for file in external:
        if not file.is_file():
            raise error(f"{path}: external data file '{file}' does not exist")
    check_external_data(path, external)
    if external:
        try:
            load_external_data_for_model(model, os.fspath(path.parent))
        except Exception as exc:  # onnx raises ValueError/OSError variants for bad locations
            raise error(f"{path}: cannot load external data: {exc}") from exc
    return LoadedModel(model, (path, *external), _default_opset(model, path))


def referenced_files(path: Path) -> tuple[Path, ...]:
    """The .onnx file and the external-data files it names, without reading the data."""
    import onnx

    return (path, *_external_files(path, onnx.load(os.fspath(path), load_external_data=False)))


def _external_files(path: Path, model: onnx.ModelProto) -> list[Path]:
    from onnx.external_data_helper import uses_external_data

    locations: set[str] = set()
    for tensor in _all_tensors(model.graph):
        if uses_external_data(tensor):
            entries = {entry.key: entry.value for entry in tensor.external_data}
            if "location" not in entries:
                raise error(f"{path}: tensor '{tensor.name}' uses external data without a location")
            locations.add(entries["location"])
    return sorted(_external_file(path, loc) for loc in sorted(locations))


def _external_file(model_file: Path, location: str) -> Path:
    """The file of an external-data `location`, which must stay in the model's folder: a
    model is data, and one naming /etc/passwd or ../../.ssh/id_rsa would otherwise copy
    that file into the library it builds (and into any artifact CI publishes)."""
    folder = model_file.parent
    file = Path(os.path.normpath(folder / location))
    inside = os.path.realpath(file).startswith(os.path.join(os.path.realpath(folder), ""))
    if os.path.isabs(location) or ".." in Path(location).parts or not inside:
        raise error(
            f"{model_file}: external data location {location!r} is outside the model's folder",
            hint="external data files sit next to the model (or below it), as onnx.save "
            "writes them",
        )
    return file


def _check_text(message: onnx.ModelProto, path: Path) -> None:
    """ONNX is proto2, whose parser does not check that string fields are UTF-8: one that
    is not comes back as bytes, which every later step would trip over."""
    for field, value in message.ListFields():
        repeated = getattr(field, "is_repeated", None)  # protobuf >= 5.28; `label` before
        items = value if (field.label == field.LABEL_REPEATED if repeated is None
                          else repeated) else [value]
        if field.type == field.TYPE_MESSAGE:
            for item in items:
                _check_text(item, path)
        elif field.type == field.TYPE_STRING:
            for item in items:
                if not isinstance(item, str):
                    raise error(f"{path}: not a valid ONNX model: a {field.name} field "
                                f"holds {bytes(item[:40])!r}, which is not UTF-8 text")


def _count_nodes(graph: onnx.GraphProto) -> int:
    return len(graph.node) + sum(
        _count_nodes(sub)
        for node in graph.node
        for attr in node.attribute
        for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
    )


def _all_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Initializers and tensor-valued attributes, in subgraphs too."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _all_tensors(attr.g)
            for subgraph in attr.graphs:
                yield from _all_tensors(subgraph)


def _default_opset(model: onnx.ModelProto, path: Path) -> int:
    import onnx
    from onnx.defs import onnx_opset_version

    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            version = int(opset.version)
            newest = onnx_opset_version()
            if version < 1:
                raise error(f"{path}: the model declares opset {version} of the default "
                            "domain, which is no ONNX opset (they start at 1)")
            if version > newest:
                # Shape inference and folding would read its ops with the semantics of an
                # older opset: silently wrong shapes or values, so this is refused.
                raise error(
                    f"{path}: the model declares opset {version} of the default domain; the "
                    f"installed onnx package ({onnx.__version__}) knows opsets up to {newest}",
                    hint="upgrade the onnx package, or export the model for an older opset",
                )
            return version
    raise error(f"{path}: the model imports no default-domain (ai.onnx) opset")


def tensor_array(tensor: onnx.TensorProto, path: Path) -> np.ndarray:
    """An initializer's values (its external data loaded already), or a located error."""
    from onnx import numpy_helper

    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:  # data that does not fit its dims or dtype: numpy's ValueError
        raise error(f"{path}: initializer '{tensor.name}' is malformed: {exc}") from exc
