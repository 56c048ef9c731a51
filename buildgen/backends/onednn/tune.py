"""`buildgen tune --backend onednn`: time a model's library with each activation layout.

For `activation_layout: auto` (buildgen.backends.onednn.tuned_layout) the choice is the
whole model's: a layout that speeds up some convolutions can cost reorders at the others'
boundaries and slow a Concat down. So each candidate is the model's own library, built from
its partition with the target's toolchains (buildgen.stages.api.build_library, the build's
commands) and only the layout changed, and the libraries are timed in one process in
alternating blocks (buildgen.partition.tune.measure.time_alternating), so a busy neighbour
costs every candidate alike. One record per candidate; codegen takes the fastest.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.backends.onednn.tuned_layout import (
    CANDIDATES,
    has_layout_choice,
    layout_key,
    module_digest,
)
from buildgen.partition.cost.keys import key_text
from buildgen.partition.cost.records import Record, Records
from buildgen.partition.tune.programs import ProgramRunner, run_here
from buildgen.targets import ResolvedTarget

if TYPE_CHECKING:
    from buildgen.partition.cli_support import Loaded

BLOCK_SECONDS = 0.1  # of calls per library, before switching to the other
ROUNDS = 7


def with_layout(target: ResolvedTarget, layout: str) -> ResolvedTarget:
    """`target` with its onednn accelerator's activation layout set to `layout`."""
    accelerators = tuple(a.with_attrs({"activation_layout": layout}) if a.kind == "onednn" else a
                         for a in target.accelerators)
    return dataclasses.replace(target, accelerators=accelerators)


def layout_keys(loaded: Loaded) -> dict[str, str]:
    """The records' key of each candidate layout for this model's onednn module; none when
    its layout changes nothing."""
    assert loaded.partition is not None
    if not has_layout_choice(loaded.graph, loaded.partition):
        return {}
    digest = module_digest(loaded.graph, loaded.partition)
    options = loaded.target.codegen_options("onednn")
    return {layout: key_text(layout_key(digest, layout, options)) for layout in CANDIDATES}


class OnednnTuner:
    """The tuner rules/onednn.yaml names (buildgen.partition.tune.backend_cli)."""

    def pending(self, loaded: Loaded, records: Records, build_dir: Path) -> tuple[int, int]:
        keys = layout_keys(loaded)
        if not keys:
            return 0, 0
        return len(keys), sum(k not in records.by_key for k in keys.values())

    def tune(self, loaded: Loaded, records: Records, build_dir: Path, machine: str, *,
             retune: bool, run: ProgramRunner = run_here) -> Records:
        """`records` with this model's time under each layout; all are measured again when
        one is missing, so the times compared always come from one run."""
        from buildgen.partition.tune.measure import time_alternating
        from buildgen.stages.api import ImportedModel, build_library

        keys = layout_keys(loaded)
        if not keys or not retune and all(k in records.by_key for k in keys.values()):
            return records
        assert loaded.partition is not None
        pair = loaded.pair
        imported = ImportedModel(loaded.graph, (build_dir / pair.graph_files.weights).read_bytes())
        folder = build_dir / "tune" / "onednn" / f"{pair.model.name}-{pair.target}"
        libraries = {
            layout: build_library(folder / layout, pair.model.name, imported, loaded.partition,
                                  with_layout(loaded.target, layout),
                                  kernels_dir=folder / "_shared")
            for layout in CANDIDATES}
        timings = time_alternating(libraries, pair.model.name, ROUNDS, BLOCK_SECONDS)
        for layout, timing in timings.items():
            print(f"  {timing.seconds * 1e3:9.3f} ms  {pair.model.name}/{pair.target} "
                  f"activation_layout: {layout}", flush=True)
        return records.merged(Record(keys[layout], timing.seconds, timing.runs, machine)
                              for layout, timing in timings.items())
