"""The onednn tests share the CPU-library test models and build helpers that live beside
the openblas tests (tests/backends/openblas/cpulib_*.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "openblas"))
