"""The cudnn tests share the GPU-library helpers of tests/backends/cublas (gpulib.py) and the
small ONNX models and build helpers of the CPU-library tests (tests/backends/openblas)."""

from __future__ import annotations

import sys
from pathlib import Path

BACKENDS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BACKENDS / "openblas"))
sys.path.insert(0, str(BACKENDS / "cublas"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
