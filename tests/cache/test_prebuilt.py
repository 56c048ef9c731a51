"""The kernels compiled at install time (buildgen/cache/prebuilt.py), for real: a store
filled by `python -m buildgen.cache.prebuilt`, then builds of a new project with an empty
cache that take their kernels from it, or compile them where the key says they must."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from buildgen.cache.prebuilt import installed_store
from buildgen.cache.settings import resolve_settings

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "ninja"))
from small_project import save_tiny_model  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("prebuilt") / "store"
    done = subprocess.run([sys.executable, "-m", "buildgen.cache.prebuilt", str(folder)],
                          env=_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "kernel objects compiled" in done.stdout, done.stdout
    return folder


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _project(root: Path) -> Path:
    """A new project of one tiny model and the default `{kind: c}` target."""
    save_tiny_model(root / "models" / "tiny.onnx")
    (root / "BUILD.yaml").write_text(
        "buildgen: 1\ntargets:\n  cpu: {kind: c}\nmodels:\n  tiny:\n"
        "    source: models/tiny.onnx\n    inputs: {x: [2, 4]}\n    targets: [cpu]\n")
    return root


def _build(root: Path, **env: str) -> dict[str, str]:
    """Build `root` with an empty cache of its own; the outcome of each kernels object."""
    done = subprocess.run([sys.executable, "-m", "buildgen", "build"], cwd=root,
                          env=_env(BUILDGEN_CACHE_DIR=str(root / "cache"), **env),
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    journal = (root / "build" / ".buildgen" / "actions.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in journal]
    return {e["out"]: e["outcome"] for e in entries if e["out"].startswith("_shared/")}


def _objects(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root / "build")): p.read_bytes()
            for p in sorted((root / "build" / "_shared").glob("*/*.o"))}


def test_a_new_project_with_an_empty_cache_links_the_kernels_compiled_at_install(
    tmp_path: Path, store: Path
) -> None:
    taken = _build(_project(tmp_path / "new"), BUILDGEN_PREBUILT=str(store))
    # The tiny model (a MatMul) links the thread pool and the GEMM, at every ISA level.
    assert taken and set(taken.values()) == {"local"}, taken
    assert {Path(o).name.split(".")[0] for o in taken} == {"bg_kernels_threads",
                                                           "bg_kernels_gemm"}
    # The project's own cache was empty and holds none of them now: they came from the store.
    stored = {p.name for p in (tmp_path / "new" / "cache").glob("cas/*/*")}
    digests = {hashlib.sha256(data).hexdigest() for data in _objects(tmp_path / "new").values()}
    assert len(digests) == len(taken) and not digests & stored

    # A compiler environment the key covers (CPATH: it could find other headers) misses
    # the store, compiles, and makes the very same bytes.
    empty = tmp_path / "no-headers"
    empty.mkdir()
    compiled = _build(_project(tmp_path / "other"), BUILDGEN_PREBUILT=str(store),
                      CPATH=str(empty))
    assert set(compiled) == set(taken) and set(compiled.values()) == {"ran"}, compiled
    assert _objects(tmp_path / "other") == _objects(tmp_path / "new")
    lib = Path("build") / "tiny" / "cpu" / "libtiny.so"
    assert (tmp_path / "other" / lib).read_bytes() == (tmp_path / "new" / lib).read_bytes()


def test_with_the_store_turned_off_the_build_compiles_its_kernels(
    tmp_path: Path, store: Path
) -> None:
    ran = _build(_project(tmp_path / "off"), BUILDGEN_PREBUILT="off")
    assert ran and set(ran.values()) == {"ran"}, ran


def test_the_setting_names_the_installed_store_another_folder_or_none(tmp_path: Path) -> None:
    assert resolve_settings({}, {"BUILDGEN_PREBUILT": "off"}).prebuilt is None
    assert resolve_settings({}, {"BUILDGEN_PREBUILT": str(tmp_path)}).prebuilt == tmp_path
    assert resolve_settings({}, {}).prebuilt == installed_store()
    assert resolve_settings({}, {"BUILDGEN_PREBUILT": "on"}).prebuilt == installed_store()


def test_installing_buildgen_compiled_the_kernels() -> None:
    """`pip install -e .` (setup.py's build_kernels) filled buildgen/_prebuilt."""
    found = installed_store()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("no buildgen/_prebuilt: setup.py's build_kernels did not fill it")
        pytest.skip("buildgen was installed without its kernels (BUILDGEN_PREBUILD=off?)")
    entries = list(found.glob("ac/*/*"))
    # Each object has its entry and its header set's entry.
    assert len(entries) >= 2 * 12, entries
