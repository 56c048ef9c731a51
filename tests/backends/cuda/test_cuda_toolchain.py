"""Finding nvcc and the CUDA runtime at gen, and what a missing toolkit says."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cuda_helpers import TARGET, example_models, run_buildgen, write_manifest

from buildgen.backends import cuda_toolchain
from buildgen.backends.cuda_toolchain import PIP_CUDA, discover_cuda, find_toolkit
from buildgen.cli import main
from buildgen.targets import parse_target


def test_the_toolkit_is_found_without_user_paths() -> None:
    toolkit = find_toolkit(None)
    version = subprocess.run([str(toolkit.nvcc), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and "release" in version.stdout
    assert (toolkit.include / "cuda_runtime_api.h").is_file()
    assert (toolkit.lib / toolkit.cudart_name).exists()
    # An explicit cuda_home gives the same toolkit the search found there.
    assert discover_cuda({"cuda_home": str(toolkit.home)})["nvcc"] == str(toolkit.nvcc)


def test_the_cuda_toolchain_compiles_for_the_arch_and_links_cudart_with_an_rpath() -> None:
    target = parse_target(TARGET, "gpu")
    toolkit = find_toolkit(None)
    tc = target.toolchain("cuda")
    assert tc.cc == str(toolkit.nvcc) and tc.language == "cuda" and tc.pool == "nvcc"
    assert "-arch=sm_90" in tc.cflags and f"-I{toolkit.include}" in tc.cflags
    assert f"-l:{toolkit.cudart_name}" in tc.ldflags
    assert f"-Wl,-rpath,{toolkit.lib}" in tc.ldflags


def test_a_cuda_home_without_nvcc_fails_at_gen_with_the_install_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "no-cuda"
    empty.mkdir()
    target = {**TARGET, "device": {"kind": "cuda", "arch": "sm_90", "cuda_home": str(empty)}}
    models = {"mlp": example_models()["mlp"]}
    manifest = write_manifest(tmp_path, models, target)
    assert main(["gen", "--manifest", str(manifest), "--build-dir", str(tmp_path / "b")]) != 0
    err = capsys.readouterr().err
    assert f"no executable {empty / 'bin' / 'nvcc'}" in err
    assert PIP_CUDA in err and "CUDA toolkit" in err
    assert not (tmp_path / "b" / "build.ninja").exists()


def test_a_cpu_only_manifest_never_looks_for_cuda(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_toolkit(cuda_home: str | None) -> None:
        raise AssertionError("a CPU-only gen looked for the CUDA toolkit")

    monkeypatch.setattr(cuda_toolchain, "find_toolkit", no_toolkit)
    manifest = write_manifest(tmp_path, {"mlp": example_models()["mlp"]},
                              {"kind": "composite", "host": {"kind": "c"}})
    assert main(["gen", "--manifest", str(manifest), "--build-dir", str(tmp_path / "b")]) == 0


def test_the_executor_compile_sees_the_runtime_headers_and_the_link_names_cudart(
    tmp_path: Path,
) -> None:
    manifest = write_manifest(tmp_path, {"mlp": example_models()["mlp"]})
    assert main(["gen", "--manifest", str(manifest), "--build-dir", str(tmp_path / "b")]) == 0
    ninja = (tmp_path / "b" / "build.ninja").read_text()
    toolkit = find_toolkit(None)
    model_compile = next(block for block in ninja.split("\nbuild ")
                         if block.startswith("mlp/gpu/obj/model.o"))
    assert f"-I{toolkit.include}" in model_compile
    link = next(block for block in ninja.split("\nbuild ")
                if block.startswith("mlp/gpu/libmlp.so"))
    assert f"-l:{toolkit.cudart_name}" in link and "-lstdc++" in link


def test_an_nvcc_without_a_runtime_takes_the_pypi_runtime(tmp_path: Path) -> None:
    wheel = cuda_toolchain.pip_runtime()
    if wheel is None:
        pytest.skip("the PyPI nvidia-cuda-runtime package is not installed")
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\nexit 0\n")
    nvcc.chmod(0o755)
    toolkit = cuda_toolchain.toolkit_at(tmp_path)
    assert toolkit.nvcc == nvcc
    assert (toolkit.include, toolkit.lib, toolkit.cudart_name) == wheel
    assert toolkit.cudart_name.startswith("libcudart.so.")  # the wheel has no plain .so


@pytest.mark.slow
def test_the_pypi_nvcc_builds_a_model_that_links_the_pypi_runtime(tmp_path: Path) -> None:
    home = cuda_toolchain.pip_nvcc_home()
    if home is None:
        pytest.skip(f"the PyPI nvidia-cuda-nvcc package is not installed ({PIP_CUDA})")
    toolkit = cuda_toolchain.toolkit_at(home)
    assert toolkit.include == home / "include" and toolkit.lib == home / "lib"
    target = {**TARGET, "device": {"kind": "cuda", "arch": "sm_90", "cuda_home": str(home)}}
    manifest = write_manifest(tmp_path, {"mlp": example_models()["mlp"]}, target)
    done = run_buildgen("build", "--manifest", str(manifest), "--build-dir",
                        str(tmp_path / "b"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lib = tmp_path / "b" / "mlp" / "gpu" / "libmlp.so"
    dynamic = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
    assert toolkit.cudart_name in dynamic and str(toolkit.lib) in dynamic
