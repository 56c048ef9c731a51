"""bg_transpose2d against numpy: register tiles (8x8 with 256-bit vectors, 4x4 with 128-bit
ones), edges on either side, more than one cache block, row strides longer than the rows,
and the element sizes ONNX tensors have."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import Kernels

SHAPES = [(1, 1), (3, 5), (8, 8), (4, 12), (9, 17), (64, 64), (70, 136), (131, 65)]
DTYPES = [np.float32, np.int32, np.int64, np.uint8, np.float16]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_matches_numpy(kernels_any: Kernels, shape: tuple[int, int], dtype: type) -> None:
    rows, cols = shape  # of the result
    rng = np.random.default_rng(rows * 1000 + cols)
    # x: cols rows of rows elements, in a buffer 3 wider (a strided view); y likewise, and
    # its padding must come back untouched.
    x_buf = rng.integers(0, 250, (cols, rows + 3)).astype(dtype)
    y_buf = np.full((rows, cols + 3), 7, dtype)
    kernels_any.transpose2d(x_buf, rows, cols, y_buf)
    np.testing.assert_array_equal(y_buf[:, :cols], x_buf[:, :rows].T)
    assert (y_buf[:, cols:] == 7).all()
