"""Where the CUTLASS headers come from, the compile flags, and one real nvcc compile."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest
from cutlass_cases import generate, target

from buildgen.backends import gpu_libraries
from buildgen.backends.cutlass.kernels import Instantiation, Tile
from buildgen.backends.cutlass.shards import render_shard
from buildgen.errors import BuildgenError
from buildgen.resources import include_dir


def test_headers_come_from_the_wheel_after_nvccs_own() -> None:
    dirs = gpu_libraries.cutlass_include_dirs()
    assert (Path(dirs[0]) / "cutlass" / "gemm" / "device" / "gemm_universal.h").is_file()
    assert dirs[1].endswith("tools/util/include")
    flags = target().toolchain("cutlass").cflags
    assert f"-Xcompiler=-idirafter,{dirs[0]}" in flags
    assert "-DNDEBUG" in flags and "--expt-relaxed-constexpr" in flags and "-arch=sm_90" in flags


def test_missing_wheel_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "cutlass_library" else real(name, *a))
    with pytest.raises(BuildgenError, match="pip install nvidia-cutlass"):
        gpu_libraries.cutlass_include_dirs()


def test_include_dirs_set_by_the_user_are_checked(tmp_path: Path) -> None:
    with pytest.raises(BuildgenError, match="no cutlass/cutlass.h"):
        gpu_libraries.discover_cutlass({"include_dirs": (str(tmp_path),), "cuda_home": None})
    found = gpu_libraries.discover_cutlass({"include_dirs": None, "cuda_home": None})
    assert found["include_dirs"] == gpu_libraries.cutlass_include_dirs()


def _nvcc(source: Path, obj: Path) -> None:
    tc = target().toolchain("cutlass")
    done = subprocess.run([tc.cc, *tc.cflags, f"-I{include_dir()}", "-c", str(source), "-o",
                           str(obj)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nm") is None or not Path("/usr/local/cuda/bin/nvcc").exists()
                    and shutil.which("nvcc") is None, reason="needs nvcc and nm")
def test_one_shard_and_a_glue_module_compile(tmp_path: Path) -> None:
    """The default kind of kernel (3xTF32 tensor op, sm80 tiles, built for sm_90): ~10-25 s."""
    kernel = Instantiation("gemm", "3xtf32", Tile((128, 128, 16), (64, 64, 16), 4), "row",
                           "column", 4, 4, 4, "relu")
    shard = tmp_path / "shard_0.cu"
    shard.write_text(render_shard(0, 1, [(kernel.symbol, kernel.params())]))
    _nvcc(shard, tmp_path / "shard_0.o")
    symbols = subprocess.run(["nm", str(tmp_path / "shard_0.o")], capture_output=True,
                             text=True, check=True).stdout
    assert f" T {kernel.symbol}" in symbols
    glue = tmp_path / "cutlass.cu"
    glue.write_text(generate("cnn")[0])
    _nvcc(glue, tmp_path / "cutlass.o")
    symbols = subprocess.run(["nm", str(tmp_path / "cutlass.o")], capture_output=True,
                             text=True, check=True).stdout
    assert " T cnn__cutlass_r0" in symbols and " U bg_cutlass_conv2d_" in symbols
