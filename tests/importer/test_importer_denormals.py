"""Subnormal weights are stored as zeros of their sign (importer/denormals.py): on Intel CPUs
each multiply with one costs a microcode assist, and their products are below the rounding
error of the sums they enter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import helper
from onnx_builders import F32, make_model, save

from buildgen.importer import import_model
from buildgen.importer.denormals import flush_denormal_weights
from buildgen.ir.serialize import load_weights

TINY = np.finfo(np.float32).tiny


def test_subnormal_weights_become_zeros_of_their_sign_and_nothing_else_changes(tmp_path: Path):
    w = np.array([[1.5, TINY / 4, -TINY / 8], [TINY, -2.0, 0.0]], np.float32)
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        [helper.make_tensor_value_info("x", F32, [1, 2])],
        [helper.make_tensor_value_info("y", F32, [1, 3])],
        {"w": w})
    result = import_model(save(model, tmp_path), {"x": [1, 2]})
    stored = load_weights(result.graph, result.weights_blob)["w"]
    assert stored.tolist() == [[1.5, 0.0, 0.0], [TINY, -2.0, 0.0]]
    assert np.signbit(stored).tolist() == [[False, False, True], [False, True, False]]


def test_only_floating_point_constants_are_touched():
    constants = {"i": np.array([1, 0, -3], np.int64), "d": np.array([1e-310, 1.0]),
                 "h": np.array([np.float16(3e-6), 1.0], np.float16)}
    assert flush_denormal_weights(constants) == 2  # float64's subnormal and float16's
    assert constants["i"].tolist() == [1, 0, -3]
    assert constants["d"].tolist() == [0.0, 1.0] and constants["d"].dtype == np.float64
    assert constants["h"].tolist() == [0.0, 1.0] and constants["h"].dtype == np.float16
