"""The import stage: ONNX → graph IR with static shapes, plus a weights file.

What later stages can rely on in an imported graph:
- every tensor has a static shape and a dtype of float32, int64, int32 or bool; dims may
  be zero (an empty tensor, of 0 bytes), for run-time tensors and weights alike; a dynamic
  dim of the model (symbolic, missing, or written as -1) is fixed by the manifest's inputs
  or follows from them;
- constant subgraphs are folded: Shape/Gather/Concat/... chains end as constants, and a
  shape-like input (Reshape's shape, Expand's shape, Slice's starts/ends/axes/steps,
  Unsqueeze's axes, ...) stays an *input* holding an int64 weight, read from the weights
  file at code-generation time (it is not rewritten into an attribute). A node that the
  reference evaluator fails on, or whose result is large and grew from small constants,
  stays a node that computes it at run time (fold.py);
- initializers listed among the graph inputs are weights; other graph inputs are
  run-time inputs (as in ONNX node tests, where Conv's W is an input);
- unused optional outputs (Dropout's mask, ...) are "" and dead nodes are gone;
- a graph output that folded to a constant is produced by Identity(<output>_value).

onnx is imported by the functions that need it, not here, so importing this package is cheap.
"""

from buildgen.importer.api import ImportResult, import_model

__all__ = ["ImportResult", "import_model"]
