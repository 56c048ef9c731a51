"""`buildgen run --compare`: the outputs against onnxruntime's on the same inputs, on the
machine buildgen runs on. The bar is the project's (tests/corpus): within `rtol` relative
to onnxruntime's value, with an absolute floor `atol` near zero; integers and booleans
must be equal."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from buildgen.errors import BuildgenError, Diagnostic
from buildgen.run.tensors import TensorSpec

RTOL, ATOL = 1e-4, 1e-5


@dataclass(frozen=True)
class Difference:
    name: str
    max_abs: float
    max_rel: float  # largest |ours - theirs| / max(|theirs|, atol / rtol)
    ok: bool
    note: str = ""  # why not ok, beyond the numbers (a shape, NaNs, unequal integers)

    def line(self) -> str:
        verdict = "ok" if self.ok else "MISMATCH" + (f" ({self.note})" if self.note else "")
        return (f"{self.name}  max abs error {self.max_abs:.3g}  "
                f"max relative {self.max_rel:.3g}  {verdict}")


def onnxruntime_outputs(model: Path, feeds: Mapping[str, np.ndarray],
                        outputs: Sequence[TensorSpec]) -> dict[str, np.ndarray]:
    """onnxruntime's outputs, keyed by our output names (its order when names differ)."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise BuildgenError(Diagnostic(
            "--compare needs onnxruntime, which is not installed",
            hint="pip install onnxruntime (or buildgen's `test` extra)")) from None
    options = ort.SessionOptions()
    options.log_severity_level = 3  # unused-initializer warnings are noise here
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    results = session.run(None, {k: v for k, v in feeds.items() if k in names})
    theirs = [o.name for o in session.get_outputs()]
    ours = [s.name for s in outputs]
    if sorted(theirs) == sorted(ours):
        return {name: np.asarray(value) for name, value in zip(theirs, results, strict=True)}
    return {name: np.asarray(value) for name, value in zip(ours, results, strict=False)}


def compare(name: str, mine: np.ndarray, theirs: np.ndarray | None, rtol: float,
            atol: float) -> Difference:
    if theirs is None:
        return Difference(name, math.inf, math.inf, False, "onnxruntime has no such output")
    if mine.shape != theirs.shape:
        return Difference(name, math.inf, math.inf, False,
                          f"shape {mine.shape}, onnxruntime's {theirs.shape}")
    if theirs.dtype.kind not in "fc":
        unequal = int(np.sum(mine != theirs))
        worst = float(np.abs(mine.astype(np.float64) - theirs).max(initial=0.0))
        return Difference(name, worst, worst, unequal == 0,
                          f"{unequal} values differ" if unequal else "")
    diff = np.abs(mine.astype(np.float64) - theirs.astype(np.float64))
    nan_agree = np.array_equal(np.isnan(mine), np.isnan(theirs))
    diff = np.nan_to_num(diff, nan=0.0, posinf=np.inf)
    floor = atol / rtol if rtol > 0 else max(atol, np.finfo(np.float64).tiny)
    scale = np.maximum(np.abs(theirs.astype(np.float64)), floor)
    max_abs = float(diff.max(initial=0.0))
    max_rel = float((diff / scale).max(initial=0.0))
    close = bool(np.allclose(mine, theirs, rtol=rtol, atol=atol, equal_nan=True))
    return Difference(name, max_abs, max_rel, close and nan_agree,
                      "" if nan_agree else "NaN where onnxruntime has none, or the reverse")
