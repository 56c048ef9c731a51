"""The `inputs:` YAML that fixes a model's dynamic dims, as `buildgen init` writes it and as
the importer's "inputs with dynamic dims" error prints it: one function, so what the error
says to paste is exactly what init would have written.

Each input with a dynamic dim gets one flow list, `x: [1, <seq>, 256]`, and a comment with
the dims as the model names them. A dim is dynamic as the importer sees it
(shapes.info_from_type): a `dim_param`, no value, or a negative value; `dim_value: 0` is a
fixed empty dim and is kept.

What a dynamic dim becomes (the choice this module makes for both callers):
  * a dim whose name says it is a batch (batch, batch_size, N, B, bs, ...): 1, and the
    comment says so. Every model with a batch axis builds for a batch of 1, so the manifest
    builds at once; a user who wants another batch edits one number.
  * any other dim (a sequence length, an image size, an unnamed dim): a placeholder
    `<name>`, which no guess can replace (a wrong sequence length builds a library that is
    silently useless). The manifest's schema refuses it where it stands:
        BUILD.yaml:6:14: error: models.enc.inputs.x[1]: expected a positive integer, got '<seq>'
              x: [1, <seq>, 256]  # [batch, seq, 256]: batch = 1 (a batch size); fill in <seq>
                     ^
    so the build stops before any work, at the line and column to edit, with the comment
    that says what the dim is shown under it.
  * an input of unknown rank: `[<dims>]`, the whole shape to write.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx

# A fixed size (int), a dynamic dim's name (str, the dim_param), or an unnamed dynamic dim.
Dim = int | str | None

_BATCH = re.compile(r"^(n|b|bs|nb|batch.*|.*_batch|.*batch_?size.*|num_?batch(es)?)$",
                    re.IGNORECASE)
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_PLACEHOLDER_TEXT = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class DynamicInput:
    """A graph input with at least one dynamic dim; ``dims`` None: its rank is unknown."""

    name: str
    dims: tuple[Dim, ...] | None


def dynamic_input(value: onnx.ValueInfoProto) -> DynamicInput | None:
    """``value`` as a DynamicInput if it has a dynamic dim (or no shape), else None.
    A non-tensor input is None too: no `inputs:` entry can fix it."""
    if value.type.WhichOneof("value") != "tensor_type":
        return None
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return DynamicInput(value.name, None)
    dims: list[Dim] = []
    for d in tensor.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or None)
    if all(isinstance(d, int) for d in dims):
        return None
    return DynamicInput(value.name, tuple(dims))


def dynamic_inputs(graph: onnx.GraphProto) -> list[DynamicInput]:
    """The run-time inputs of ``graph`` (initializers listed as inputs are weights) that
    have a dynamic dim, in the graph's order."""
    weights = {t.name for t in graph.initializer}
    seen: set[str] = set()
    found = []
    for value in graph.input:
        if value.name in weights or value.name in seen:
            continue
        seen.add(value.name)
        dynamic = dynamic_input(value)
        if dynamic is not None:
            found.append(dynamic)
    return found


def is_batch_name(name: str) -> bool:
    """Whether a dim named ``name`` is a batch size by every convention we know."""
    return bool(_BATCH.match(name.strip()))


def placeholder(dim: str | None, axis: int) -> str:
    """The text written for a dim that must be filled in: `<seq>`, `<dim1>` if unnamed."""
    text = _PLACEHOLDER_TEXT.sub("_", dim or "").strip("_")
    return f"<{text or f'dim{axis}'}>"


def yaml_key(text: str) -> str:
    """``text`` as a YAML mapping key: plain when it reads back as itself, else quoted."""
    return text if _PLAIN_KEY.match(text) else json.dumps(text)


def _comment_text(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def input_line(item: DynamicInput) -> tuple[str, int]:
    """``name: [dims]  # comment`` for one input; and how many placeholders it holds."""
    key = yaml_key(item.name)
    if item.dims is None:
        return f"{key}: [<dims>]  # rank unknown in the model: write the whole shape", 1
    values: list[str] = []
    guessed: list[str] = []
    fill: list[str] = []
    for axis, dim in enumerate(item.dims):
        if isinstance(dim, int):
            values.append(str(dim))
        elif dim is not None and is_batch_name(dim):
            values.append("1")
            if dim not in guessed:
                guessed.append(dim)
        else:
            text = placeholder(dim, axis)
            values.append(text)
            if text not in fill:
                fill.append(text)
    named = ", ".join(
        str(d) if isinstance(d, int) else ("?" if d is None else d) for d in item.dims
    )
    notes = []
    if guessed:
        notes.append(f"{' = '.join(guessed)} = 1 (a batch size)")
    if fill:
        notes.append(f"fill in {', '.join(fill)}")
    comment = _comment_text(f"[{named}]: {'; '.join(notes)}")
    return f"{key}: [{', '.join(values)}]  # {comment}", len(fill)


def inputs_lines(
    items: Iterable[DynamicInput], indent: str, step: str, *, header: bool = True
) -> list[str]:
    """The `inputs:` block (``header``) or only its entries, as lines without line breaks:
    `inputs:` at ``indent``, each entry one ``step`` deeper (at ``indent`` without header)."""
    lines = [f"{indent}inputs:"] if header else []
    inner = indent + step if header else indent
    lines += [inner + input_line(item)[0] for item in items]
    return lines


def placeholder_count(items: Sequence[DynamicInput]) -> int:
    """How many dims of ``items`` are written as placeholders the user must fill in."""
    return sum(input_line(item)[1] for item in items)
