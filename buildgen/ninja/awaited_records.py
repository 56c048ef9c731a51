"""Tuning records the manifest names before they exist.

`partition: {records: FILE}` names where `buildgen tune` writes its measurements, so a
project commits the manifest before anything is tuned, and a fresh checkout builds before
anyone tunes. A missing file therefore means "no records yet": gen plans the model without
it (the cost policy estimates, a tuned backend takes its defaults), and, since ninja cannot
depend on a file that neither exists nor has a rule, gen watches the nearest folder that
does exist. The file appearing changes that folder's mtime, so ninja (or CMake's
configure step) re-runs gen, which then makes the file an input like any other.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from buildgen.manifest import ModelSpec
from buildgen.ninja.context import GenContext


def without_awaited_records(
    models: Sequence[ModelSpec], ctx: GenContext
) -> tuple[tuple[ModelSpec, ...], GenContext]:
    """`models` with each missing records file unset, and `ctx` re-running gen when one
    appears."""
    planned: list[ModelSpec] = []
    watched: set[Path] = set()
    for model in models:
        records = model.partition.records
        if records is None or os.path.exists(records):
            planned.append(model)
            continue
        watched.add(_nearest_folder(records))
        partition = dataclasses.replace(model.partition, records=None)
        planned.append(dataclasses.replace(model, partition=partition))
    if not watched:
        return tuple(planned), ctx
    inputs = tuple(sorted({*ctx.generator_inputs, *watched}))
    return tuple(planned), dataclasses.replace(ctx, generator_inputs=inputs)


def _nearest_folder(path: Path) -> Path:
    folder = path.parent
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return folder
