"""Without a GPU: each example's device code, built by `buildgen build` and then compiled
for the CPU stand-in of CUDA (emulate.py), agrees with onnxruntime. It runs the generated
executor (arenas, copies) and cuda module (fusion, indexing, memory plan) for real; only
the hardware is simulated."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cuda_helpers import MIXED, TARGET_NAME, example_models
from emulate import emulated_build, rewrite_launches

from buildgen import runtime

pytestmark = pytest.mark.slow
MODELS = example_models()
SOURCES = {**{m: source for m, (source, _) in MODELS.items()}, MIXED[0]: MODELS[MIXED[1]][0]}


def test_launches_become_emulator_calls() -> None:
    text = rewrite_launches("    bg_gemm<<<dim3(4, 1, 8), dim3(BG_TILE, BG_TILE), 0, stream>>>"
                            "(a, b, NULL, c, p);\n")
    assert text == ("    bg_emu_launch(dim3(4, 1, 8), dim3(BG_TILE, BG_TILE), true, "
                    "[&] { bg_gemm(a, b, NULL, c, p); });\n")


@pytest.mark.parametrize("model", sorted(SOURCES))
def test_emulated_device_code_matches_onnxruntime(
    cuda_examples: Path, model: str, tmp_path: Path
) -> None:
    ort = pytest.importorskip("onnxruntime")
    lib = emulated_build(cuda_examples / model / TARGET_NAME, model, tmp_path)
    compiled = runtime.load(lib, model)
    rng = np.random.default_rng(len(model))
    feeds = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in compiled.inputs}
    ours = compiled.run(feeds)
    again = compiled.run(feeds)
    compiled.close()
    session = ort.InferenceSession(str(SOURCES[model]), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    theirs = dict(zip(names, session.run(None, feeds), strict=True))
    for name, value in ours.items():
        np.testing.assert_allclose(value, theirs[name], rtol=1e-3, atol=1e-4, err_msg=name)
        np.testing.assert_array_equal(again[name], value, err_msg=f"{name} (second run)")
