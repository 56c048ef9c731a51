"""Finding cuBLAS and cuDNN at gen: the wheels' folders, the attributes that override them,
and the error (with the pip command) when one is missing."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpulib import gpu_target

from buildgen.backends import gpu_libraries
from buildgen.backends.gpu_libraries import CUBLAS, CUDNN, WheelLibrary, library_dirs
from buildgen.errors import BuildgenError
from buildgen.targets.toolchain import toolchain_for


def _installed(library: WheelLibrary) -> gpu_libraries.LibraryDirs:
    try:
        return gpu_libraries.wheel_dirs(library)
    except BuildgenError:
        pytest.skip(f"{library.dist} is not installed: {library.pip}")


def test_wheels_give_include_and_lib_folders() -> None:
    cublas = _installed(CUBLAS)
    assert (cublas.include / "cublasLt.h").is_file()
    assert (cublas.lib / "libcublasLt.so.13").exists()
    cudnn = _installed(CUDNN)
    assert (cudnn.include / "cudnn.h").is_file() and (cudnn.lib / "libcudnn.so.9").exists()


def test_toolchains_link_the_versioned_libraries_with_an_rpath() -> None:
    cublas, cudnn = _installed(CUBLAS), _installed(CUDNN)
    target = gpu_target()
    tc = toolchain_for(target, "cublas")
    assert f"-Xcompiler=-idirafter,{cublas.include}" in tc.cflags
    assert tc.ldflags[:2] == ("-l:libcublas.so.13", "-l:libcublasLt.so.13")
    assert f"-Wl,-rpath,{cublas.lib}" in tc.ldflags
    tc = toolchain_for(target, "cudnn")
    assert "-l:libcudnn.so.9" in tc.ldflags and f"-L{cudnn.lib}" in tc.ldflags
    assert tc.cc == toolchain_for(target, "cuda").cc  # the device's nvcc


def test_missing_wheel_is_an_error_naming_the_pip_command(monkeypatch) -> None:
    monkeypatch.setattr(gpu_libraries, "installed_file", lambda dist, suffix: None)
    gpu_libraries.wheel_dirs.cache_clear()
    try:
        with pytest.raises(BuildgenError) as caught:
            gpu_libraries.discover_cudnn({})
    finally:
        gpu_libraries.wheel_dirs.cache_clear()
    text = str(caught.value)
    assert "cuDNN 9 is not installed" in text
    assert "pip install nvidia-cudnn-cu13" in text and "pip install 'buildgen[cuda]'" in text


def test_folders_a_user_sets_are_checked(tmp_path: Path) -> None:
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cublas_v2.h").write_text("")
    with pytest.raises(BuildgenError) as caught:
        library_dirs(CUBLAS, {"include_dir": str(tmp_path / "include"),
                              "lib_dir": str(tmp_path / "lib")})
    assert f"no {tmp_path / 'lib' / 'libcublas.so.13'}" in str(caught.value)
    (tmp_path / "lib").mkdir()
    for name in CUBLAS.libraries:
        (tmp_path / "lib" / name).write_text("")
    dirs = library_dirs(CUBLAS, {"include_dir": str(tmp_path / "include"),
                                 "lib_dir": str(tmp_path / "lib")})
    assert dirs.as_attrs() == {"include_dir": str(tmp_path / "include"),
                               "lib_dir": str(tmp_path / "lib")}


def test_gen_fails_with_the_pip_command(monkeypatch, tmp_path: Path, capsys) -> None:
    """A manifest whose target needs cuBLAS fails at gen, before anything is built."""
    import yaml
    from cpulib_build import REPO
    from gpulib import GPU_TARGET

    from buildgen.cli import main

    manifest = tmp_path / "BUILD.yaml"
    manifest.write_text(yaml.safe_dump({
        "buildgen": 1, "targets": {"gpu": GPU_TARGET},
        "models": {"mlp": {"source": str(REPO / "examples/models/mlp.onnx"),
                           "inputs": {"x": [8, 512]}, "targets": ["gpu"]}},
    }))
    real = gpu_libraries.installed_file
    monkeypatch.setattr(gpu_libraries, "installed_file", lambda dist, suffix: None
                        if dist == CUBLAS.dist else real(dist, suffix))
    gpu_libraries.wheel_dirs.cache_clear()
    try:
        rc = main(["gen", "--manifest", str(manifest), "--build-dir", str(tmp_path / "b")])
    finally:
        gpu_libraries.wheel_dirs.cache_clear()
    err = capsys.readouterr().err
    assert rc == 1 and "cuBLAS is not installed" in err and "pip install nvidia-cublas" in err
    assert not (tmp_path / "b" / "build.ninja").exists()
