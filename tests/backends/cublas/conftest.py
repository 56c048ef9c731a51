"""The cublas tests share the GPU-library helpers beside them (gpulib.py) and the small ONNX
models and build helpers of the CPU-library tests (tests/backends/openblas/cpulib_*.py)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "openblas"))
sys.path.insert(0, str(HERE))
