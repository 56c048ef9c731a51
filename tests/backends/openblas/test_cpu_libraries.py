"""Finding OpenBLAS and oneDNN at gen: installed packages are found without settings, a bad
prefix is caught at gen, a missing library names the pip command, and the found paths
reach compile and link flags (with an rpath)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from buildgen.backends import libraries
from buildgen.errors import BuildgenError
from buildgen.targets import parse_target


def _composite(kind: str, **attrs: object) -> dict[str, object]:
    return {"kind": "composite", "accelerators": [{"kind": kind, **attrs}]}


def test_scipy_openblas_is_found_and_reaches_the_flags() -> None:
    pytest.importorskip("scipy_openblas32")
    prefix = libraries.discover_openblas({"library": "scipy_openblas", "prefix": None})["prefix"]
    assert (Path(prefix) / "include" / "cblas.h").is_file()
    toolchain = parse_target(_composite("openblas")).toolchain("openblas")
    assert f"-I{prefix}/include" in toolchain.cflags
    assert toolchain.ldflags[:3] == ("-lscipy_openblas", f"-L{prefix}/lib",
                                     f"-Wl,-rpath,{prefix}/lib")


def test_a_system_openblas_uses_the_default_paths() -> None:
    assert libraries.discover_openblas({"library": "openblas", "prefix": None}) == {}
    toolchain = parse_target(_composite("openblas", library="openblas")).toolchain("openblas")
    assert toolchain.ldflags == ("-lopenblas",)


def test_a_wrong_prefix_fails_at_gen(tmp_path: Path) -> None:
    with pytest.raises(BuildgenError, match=r"no .*cblas\.h.*no libopenblas\.so"):
        libraries.discover_openblas({"library": "openblas", "prefix": str(tmp_path)})
    with pytest.raises(BuildgenError, match=r"oneDNN prefix .*no .*dnnl\.h"):
        libraries.discover_onednn({"prefix": str(tmp_path)})


def test_missing_openblas_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "scipy_openblas32", None)  # makes the import fail
    libraries.scipy_openblas_prefix.cache_clear()
    try:
        with pytest.raises(BuildgenError, match="pip install scipy-openblas32") as caught:
            parse_target(_composite("openblas")).toolchain("openblas")
        assert "pip install 'buildgen[cpu]'" in str(caught.value)
    finally:
        libraries.scipy_openblas_prefix.cache_clear()


def test_missing_onednn_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(libraries, "installed_file", lambda dist, pattern: None)
    libraries.pip_onednn_prefix.cache_clear()
    try:
        with pytest.raises(BuildgenError, match="pip install onednn-cpu-gomp onednn-devel"):
            parse_target(_composite("onednn")).toolchain("onednn")
    finally:
        libraries.pip_onednn_prefix.cache_clear()


def test_onednn_3_is_found_and_reaches_the_flags() -> None:
    try:
        prefix = Path(libraries.discover_onednn({"prefix": None})["prefix"])
    except BuildgenError:
        pytest.skip(f"oneDNN is not installed: {libraries.ONEDNN_PIP}")
    assert libraries.onednn_version(prefix)[0] >= 3
    toolchain = parse_target(_composite("onednn", threads=2)).toolchain("onednn")
    assert f"-Wl,-rpath,{prefix}/lib" in toolchain.ldflags and "-ldnnl" in toolchain.ldflags


def test_onednn_2_is_refused(tmp_path: Path) -> None:
    headers = tmp_path / "include" / "oneapi" / "dnnl"
    headers.mkdir(parents=True)
    (headers / "dnnl.h").write_text("")
    (headers / "dnnl_version.h").write_text(
        "#define DNNL_VERSION_MAJOR 2\n#define DNNL_VERSION_MINOR 6\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libdnnl.so.2").write_text("")
    with pytest.raises(BuildgenError, match=r"is 2\.6; the onednn backend needs 3\.x"):
        libraries.discover_onednn({"prefix": str(tmp_path)})


def test_gen_fails_before_any_build_when_a_library_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from buildgen.ninja.gen import generate

    repo = Path(__file__).resolve().parents[3]
    manifest = tmp_path / "BUILD.yaml"
    manifest.write_text(
        "buildgen: 1\n"
        "targets:\n  cpu: {kind: composite, accelerators: [onednn]}\n"
        f"models:\n  mlp: {{source: {repo / 'examples/models/mlp.onnx'}, "
        "inputs: {x: [8, 512]}, targets: [cpu]}\n"
    )
    monkeypatch.setattr(libraries, "installed_file", lambda dist, pattern: None)
    libraries.pip_onednn_prefix.cache_clear()
    try:
        with pytest.raises(BuildgenError, match="pip install onednn-cpu-gomp"):
            generate(manifest, tmp_path / "build")
    finally:
        libraries.pip_onednn_prefix.cache_clear()
    assert not (tmp_path / "build" / "build.ninja").exists()
