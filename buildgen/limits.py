"""Bounds on what input files may ask of buildgen, each overridable from the environment.

A model file (or a partition or records file) is input from anyone who can open a pull
request: without bounds, a 50-byte
graph can declare a [10^9, 10^9] input and make every later stage plan terabytes, and a
file of millions of nodes keeps CI busy for hours. The defaults are far above real models
(the largest CPU-compilable models are a few GB of weights and tens of thousands of nodes);
a user who really has a bigger one raises the bound in the environment, which the error
names. A bound decides only whether the import runs, never what it writes, so it is not
part of any cache key.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from buildgen.errors import error

GIB = 1 << 30

# Protobuf cannot parse a message of 2 GiB or more, so such an .onnx file is not a model
# onnx.load can read: its weights must be external data.
PROTOBUF_LIMIT = 2 * GIB


@dataclass(frozen=True)
class Bound:
    env: str  # the environment variable that overrides the default
    default: int
    what: str  # "a model's nodes (subgraphs included)"
    in_bytes: bool = True  # a size (2GiB), or a count

    def value(self) -> int:
        text = os.environ.get(self.env, "").strip()
        if not text:
            return self.default
        from buildgen.cache.settings import SettingsError, parse_size

        try:
            return parse_size(text)
        except SettingsError as exc:
            raise error(f"{self.env}={text}: {exc}") from None

    def check(self, amount: int, subject: str) -> None:
        limit = self.value()
        if amount > limit:
            raise error(
                f"{subject}: {amount:,} is more than the limit on {self.what} ({limit:,})",
                hint=f"if the model is meant to be this large, raise the limit: {self.env}="
                f"{_round_up(amount) if self.in_bytes else amount} in the environment",
            )


MODEL_BYTES = Bound("BUILDGEN_MAX_MODEL_BYTES", 32 * GIB,
                    "a model's bytes (the .onnx file and its external data)")
NODES = Bound("BUILDGEN_MAX_NODES", 1_000_000, "a model's nodes (subgraphs included)", False)
TENSOR_BYTES = Bound("BUILDGEN_MAX_TENSOR_BYTES", 16 * GIB, "the bytes of one tensor")
JSON_BYTES = Bound("BUILDGEN_MAX_JSON_BYTES", 64 << 20,
                   "the bytes of a partition or tuning-records file")


def read_json(path: Path, what: str) -> Any:
    """A user's JSON file (`what`: "the partition file"), within JSON_BYTES; errors located."""
    try:
        JSON_BYTES.check(path.stat().st_size, f"{path}: bytes")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: {what} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise error(f"{path}: not JSON: {exc}") from None
    except RecursionError:  # [[[[...]]]] deeper than the interpreter's stack
        raise error(f"{path}: not {what}: JSON nested too deeply") from None


def check_model_file(model_file: Path) -> None:
    """Before parsing: the .onnx file alone."""
    size = model_file.stat().st_size
    if size >= PROTOBUF_LIMIT:
        raise error(
            f"{model_file}: the file is {size:,} bytes; an ONNX protobuf must be under 2 GiB",
            hint="save the weights as external data: onnx.save(model, path, "
            "save_as_external_data=True)",
        )
    MODEL_BYTES.check(size, f"{model_file}: bytes")


def check_external_data(model_file: Path, external: list[Path]) -> None:
    """Before reading the external data: the file and its data together."""
    total = model_file.stat().st_size + sum(f.stat().st_size for f in external)
    MODEL_BYTES.check(total, f"{model_file}: bytes with external data")


def _round_up(amount: int) -> str:
    """A value for the hint that admits `amount`: whole GiB above 1 GiB, else bytes."""
    if amount > GIB:
        return f"{-(-amount // GIB)}GiB"
    return str(amount)
