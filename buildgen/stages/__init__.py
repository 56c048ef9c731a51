"""The build's stages.

From Python (buildgen.stages.api, loaded on first use): import_model, resolve_target,
partition, save_partition, load_partition, codegen, build_library — run the stages in a
script, write your own partition pass, hand its result back to the build.

For the build's actions: `python -m buildgen.stages <stage> ...`. Each stage module is
thin: it parses arguments, reads files, calls the stage's pure function and returns the
bytes of its outputs; buildgen.stages.runner writes them (only when changed, atomically)
or, on failure, removes them. Stage modules are imported only when their stage runs, and
import heavy libraries (onnx) only inside, so an action starts fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from buildgen.stages.api import (
        ImportedModel,
        build_library,
        codegen,
        import_model,
        load_partition,
        partition,
        resolve_target,
        save_partition,
    )

# stage name -> (module, one-line help). A table, so `--help` needs no stage imports.
STAGES: dict[str, tuple[str, str]] = {
    "import": ("buildgen.stages.import_stage", "ONNX model -> graph.json + weights.bin"),
    "partition": ("buildgen.stages.partition_stage", "graph + target -> partition.json"),
    "codegen": ("buildgen.stages.codegen_stage", "one backend's source module"),
    "executor": ("buildgen.stages.executor_stage", "model.c, <model>.h and weights.S"),
    "report": ("buildgen.stages.report_stage", "report.json + report.md"),
    "shared_kernels": ("buildgen.stages.shared_kernels_stage",
                       "every model's instantiation list -> a kind's kernel shards"),
    "link_kernels": ("buildgen.stages.link_kernels_stage",
                     "a module's kernels sources -> the objects its libraries link"),
}

_API = (
    "ImportedModel", "build_library", "codegen", "import_model", "load_partition",
    "partition", "resolve_target", "save_partition",
)
__all__ = [
    "STAGES", "ImportedModel", "build_library", "codegen", "import_model", "load_partition",
    "partition", "resolve_target", "save_partition",
]


def __getattr__(name: str) -> Any:
    # The Python API loads on first use, so the actions' `python -m buildgen.stages` stays
    # as light as before.
    if name in _API:
        return getattr(importlib.import_module("buildgen.stages.api"), name)
    raise AttributeError(f"module 'buildgen.stages' has no attribute {name!r}")

