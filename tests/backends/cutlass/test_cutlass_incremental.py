"""What ninja re-runs: a second model with the same layers compiles no CUTLASS kernel, and
a cutlass option re-compiles only CUTLASS objects.

Compiles run through a stand-in nvcc (a toolkit folder whose bin/nvcc writes an empty
object and a depfile and logs what it compiled; the runtime headers and libraries are the
real toolkit's), so the test checks ninja's decisions in seconds instead of minutes of
CUTLASS compiles. The real compile is test_cutlass_toolchain's.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from cutlass_cases import ROOT
from stand_in_nvcc import HAS_CUDA_HEADERS, stand_in_toolkit

from buildgen.ninja.gen import generate

pytestmark = pytest.mark.skipif(
    not HAS_CUDA_HEADERS, reason="needs the CUDA toolkit's runtime headers at /usr/local/cuda")

MANIFEST = """\
buildgen: 1
targets:
  gpu:
    kind: composite
    host: {{kind: c}}
    device: {{kind: cuda, arch: sm_90, cuda_home: {home}}}
    accelerators: [{{kind: cutlass, split_k_slices: {split}, find_first_valid: false}}]
models:
{models}
"""


def _write(manifest: Path, home: Path, models: list[str], split: list[int]) -> None:
    mlp = ROOT / "examples" / "models" / "mlp.onnx"
    entries = "\n".join(f"  {m}: {{source: {mlp}, inputs: {{x: [8, 512]}}, targets: [gpu]}}"
                        for m in models)
    manifest.write_text(MANIFEST.format(home=home, split=split, models=entries))


def _build(manifest: Path, build: Path) -> list[str]:
    """gen + ninja; the outputs of the actions ninja ran (from .ninja_log)."""
    log = build / ".ninja_log"
    seen = len(log.read_text().splitlines()) if log.exists() else 0
    generate(manifest, build)
    done = subprocess.run(["ninja", "-C", str(build)], capture_output=True, text=True,
                          check=False, env={**os.environ, "NINJA_STATUS": ""})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    lines = log.read_text().splitlines()[max(seen, 1):]
    return [line.split("\t")[3] for line in lines if not line.startswith("#")]


@pytest.mark.slow
def test_shared_kernels_compile_once_and_options_touch_only_cutlass(tmp_path: Path) -> None:
    home = stand_in_toolkit(tmp_path / "cuda")
    manifest, build = tmp_path / "BUILD.yaml", tmp_path / "build"
    _write(manifest, home, ["a"], [1])
    first = _build(manifest, build)
    shards = sorted(o for o in first if o.startswith("_shared/cutlass-") and o.endswith(".o"))
    assert len(shards) == 4 and "a/gpu/liba.so" in first

    # A second model with the same layers: its own glue and executor, no kernel compile.
    _write(manifest, home, ["a", "b"], [1])
    second = _build(manifest, build)
    assert "b/gpu/obj/cutlass.o" in second and "b/gpu/libb.so" in second
    assert not [o for o in second if o.startswith("_shared/") and o.endswith(".o")]
    assert "a/gpu/obj/cutlass.o" not in second

    # split_k_slices: cutlass codegen, glue and shard compiles only; relinks follow.
    _write(manifest, home, ["a", "b"], [1, 2, 4])
    third = _build(manifest, build)
    compiled = {o for o in third if o.endswith(".o")}
    assert {"a/gpu/obj/cutlass.o", "b/gpu/obj/cutlass.o"} <= compiled
    assert compiled <= {"a/gpu/obj/cutlass.o", "b/gpu/obj/cutlass.o", *shards}
    assert not [o for o in third if "/partition.json" in o or o.endswith("src/model.c")]
