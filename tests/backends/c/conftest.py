"""Fixtures of the c backend tests: skip compiling tests when the C toolchain or the
kernel library header is not there."""

from __future__ import annotations

import pytest
from c_harness import kernels_header_missing


@pytest.fixture(scope="session")
def c_toolchain() -> None:
    reason = kernels_header_missing()
    if reason:
        pytest.skip(f"cannot compile generated C: {reason}")
