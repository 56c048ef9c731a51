"""File-in/file-out entries for the build's actions: `python -m buildgen.stages <stage> ...`.

Each stage module is thin: it parses arguments, reads files, calls the stage's pure
function and returns the bytes of its outputs; buildgen.stages.runner writes them (only
when changed, atomically) or, on failure, removes them. Stage modules are imported only
when their stage runs, and import heavy libraries (onnx) only inside, so an action starts
fast.
"""

from __future__ import annotations

# stage name -> (module, one-line help). A table, so `--help` needs no stage imports.
STAGES: dict[str, tuple[str, str]] = {
    "import": ("buildgen.stages.import_stage", "ONNX model -> graph.json + weights.bin"),
    "partition": ("buildgen.stages.partition_stage", "graph + target -> partition.json"),
    "codegen": ("buildgen.stages.codegen_stage", "one backend's source module"),
    "executor": ("buildgen.stages.executor_stage", "model.c, <model>.h and weights.S"),
    "report": ("buildgen.stages.report_stage", "report.json + report.md"),
}
