"""The cutlass tests import their shared helpers from cutlass_cases.py beside them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
