"""On a machine with a CUDA device: every example's library agrees with onnxruntime (CPU)
within 1e-3 relative, and a second run gives the same bytes. Skipped without one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cuda_helpers import MIXED, TARGET_NAME, cuda_device_problem, example_models

from buildgen import runtime

pytestmark = pytest.mark.slow
MODELS = example_models()
SOURCES = {**{m: source for m, (source, _) in MODELS.items()}, MIXED[0]: MODELS[MIXED[1]][0]}


@pytest.fixture(scope="module", autouse=True)
def needs_a_gpu() -> None:
    problem = cuda_device_problem()
    if problem is not None:
        pytest.skip(f"no CUDA device: {problem}")


@pytest.mark.parametrize("model", sorted(SOURCES))
def test_matches_onnxruntime(cuda_examples: Path, model: str) -> None:
    ort = pytest.importorskip("onnxruntime")
    compiled = runtime.load(cuda_examples / model / TARGET_NAME / f"lib{model}.so")
    rng = np.random.default_rng(len(model))
    feeds = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in compiled.inputs}
    ours = compiled.run(feeds)
    again = compiled.run(feeds)
    compiled.close()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(SOURCES[model]), options,
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    theirs = dict(zip(names, session.run(None, feeds), strict=True))
    for name, value in ours.items():
        np.testing.assert_allclose(value, theirs[name], rtol=1e-3, atol=1e-4, err_msg=name)
        np.testing.assert_array_equal(again[name], value, err_msg=f"{name} (second run)")
