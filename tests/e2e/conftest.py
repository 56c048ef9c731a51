"""Shared fixtures of the end-to-end tests: run `buildgen build`, run onnxruntime."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]

BuildFn = Callable[..., subprocess.CompletedProcess[str]]
OrtFn = Callable[[Path, Mapping[str, np.ndarray]], list[np.ndarray]]


def _env() -> dict[str, str]:
    # The build's actions run `python -m buildgen...` in ninja's subprocesses; with the
    # repository on PYTHONPATH they find this checkout even when it is not pip-installed.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def run_build(
    manifest: Path,
    build_dir: Path,
    ninja_args: Sequence[str] = (),
    check: bool = True,
    names: Sequence[str] = (),
    cache: bool = True,
) -> subprocess.CompletedProcess[str]:
    """`buildgen build --manifest M --build-dir B [names] -- <ninja_args>`, output captured.
    `cache=False` builds with the action cache off (plain commands in build.ninja)."""
    cmd = [sys.executable, "-m", "buildgen", "build", "--manifest", str(manifest)]
    cmd += ["--build-dir", str(build_dir), *names]
    if ninja_args:
        cmd += ["--", *ninja_args]
    env = _env()
    if not cache:
        env["BUILDGEN_CACHE"] = "off"
    result = subprocess.run(
        cmd, cwd=manifest.parent, env=env, capture_output=True, text=True, check=False
    )
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(scope="session")
def buildgen_build() -> BuildFn:
    return run_build


@pytest.fixture(scope="session")
def repo_env() -> dict[str, str]:
    """The environment for subprocesses that import buildgen from this checkout."""
    return _env()


def ort_session(model: Path, threads: int = 1):  # -> onnxruntime.InferenceSession
    """An onnxruntime CPU session with `threads` intra-op threads."""
    ort = pytest.importorskip("onnxruntime")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3  # unused-initializer warnings of node tests are noise here
    return ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])


def ort_run(model: Path, feeds: Mapping[str, np.ndarray], threads: int = 1) -> list[np.ndarray]:
    """onnxruntime's outputs in the model's output order; feeds it does not take are dropped."""
    session = ort_session(model, threads)
    names = {i.name for i in session.get_inputs()}
    return list(session.run(None, {k: v for k, v in feeds.items() if k in names}))


@pytest.fixture(scope="session")
def onnxruntime_session():
    return ort_session


@pytest.fixture(scope="session")
def onnxruntime_outputs() -> OrtFn:
    return ort_run
