"""The cuda tests' helpers live in cuda_helpers.py; this puts them on the path and shares
one build of the examples between the build and the GPU tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cuda_helpers import MIXED, build, example_models, write_manifest  # noqa: E402


@pytest.fixture(scope="session")
def cuda_examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every example plus `mixed` (mlp with a Gemm pinned to the host) built for
    {host: c, device: {kind: cuda, arch: sm_90}}; the build folder."""
    folder = tmp_path_factory.mktemp("cuda-examples")
    models = example_models()
    name, source, pins = MIXED
    models[name] = models[source]
    write_manifest(folder, models, pins={name: pins})
    return build(folder)
