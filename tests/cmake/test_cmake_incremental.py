"""Incremental builds under CMake: each edit re-runs exactly what it changes.

A tiny model (relu(x @ w + b), weights in an external-data file) built for two targets by
a C application linking one of them, with each generator and cmake. The build dir lies in
the project, so the stages' depfiles name files by relative paths, as CMake must read them.
Every edit is followed by a plain `cmake --build`; what it printed is what ran.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cmake_helpers import CMakeBuild, buildgen_actions, c_objects, cmake_params
from tiny_project import check_app, save_model, write_project

pytestmark = pytest.mark.slow

def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def _objects(events: list[str], label: str) -> list[str]:
    return sorted(e.rsplit("/", 1)[-1] for e in events if e.startswith("Building ")
                  and f"/{label}/" in e)


@pytest.mark.parametrize(("cmake", "generator"), cmake_params())
def test_each_edit_reruns_what_it_changes(tmp_path: Path, cmake: str, generator: str) -> None:
    project = tmp_path / "my app"  # a space, as in real users' paths
    write_project(project, seed=1)
    build = CMakeBuild(cmake, generator, project, project / "build")
    build.configure()

    first = build.events()
    assert "IMPORT tiny" in first and "PARTITION tiny/small" in first
    check_app(build.build / "app", rows=2, seed=1)
    assert build.events() == []

    # One target's compile flags: its objects only; the app links the other target.
    _edit(project / "BUILD.yaml", "small: {kind: c, opt_level: 1}",
          "small: {kind: c, opt_level: 1, cflags: [-DEDITED]}")
    events = build.events()
    assert buildgen_actions(events) == ["CC tiny/small weights.o"]
    assert _objects(events, "tiny/small") == [*c_objects(), "model.c.o"]
    assert _objects(events, "tiny/cpu") == []
    assert not any("app" in e.split("/")[-1] for e in events if e.startswith("Linking "))
    assert build.events() == []

    # New weights in the external-data file, which only the import's depfile names.
    save_model(tmp_path / "new", seed=2)
    (project / "models" / "tiny.bin").write_bytes((tmp_path / "new" / "tiny.bin").read_bytes())
    events = buildgen_actions(build.events())
    assert "IMPORT tiny" in events
    if generator == "Ninja":  # restat: graph.json kept its bytes, so no partition re-runs
        assert not any(e.startswith("PARTITION") for e in events)
    check_app(build.build / "app", rows=2, seed=2)
    assert build.events() == []

    # An input shape lives on the import's command line only.
    _edit(project / "BUILD.yaml", "x: [2, 4]", "x: [3, 4]")
    assert "IMPORT tiny" in buildgen_actions(build.events())
    check_app(build.build / "app", rows=3, seed=2)
    assert build.events() == []

    # A new target appears as new CMake targets, in the same `cmake --build`.
    _edit(project / "BUILD.yaml", "targets: [cpu, small]", "targets: [cpu, small, fast]")
    _edit(project / "BUILD.yaml", "small: {kind", "fast: {kind: c, opt_level: 3}\n  small: {kind")
    events = buildgen_actions(build.events())
    assert "PARTITION tiny/fast" in events and "PARTITION tiny/cpu" not in events
    assert (project / "build" / "buildgen" / "tiny" / "fast" / "libtiny.so").is_file()
    assert build.events() == []

    # A manifest error fails the build with its location; fixing it builds again.
    good = (project / "BUILD.yaml").read_text()
    (project / "BUILD.yaml").write_text(good.replace("source:", "sorce:"))
    failed = build.build_all(check=False)
    said = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "BUILD.yaml:" in said and "sorce" in said
    (project / "BUILD.yaml").write_text(good)
    assert buildgen_actions(build.events()) == []
    assert build.events() == []


def _openblas_ready() -> bool:
    from buildgen.targets import has_code_generator

    try:
        import scipy_openblas32  # noqa: F401
    except ImportError:
        return False
    return has_code_generator("openblas")


@pytest.mark.skipif(not _openblas_ready(), reason="needs the openblas backend + scipy-openblas32")
@pytest.mark.parametrize(("cmake", "generator"), cmake_params()[:2])
def test_one_backends_flags_rebuild_its_objects_only(
    tmp_path: Path, cmake: str, generator: str
) -> None:
    """Each backend's sources are an object library of their own, so even make recompiles
    only the backend whose flags changed."""
    project = tmp_path / "app"
    write_project(project)
    _edit(project / "BUILD.yaml", "host: {kind: c, opt_level: 2}}",
          "host: {kind: c, opt_level: 2}, accelerators: [{kind: openblas}]}")
    build = CMakeBuild(cmake, generator, project, project / "build")
    build.configure()
    assert "CODEGEN openblas tiny/cpu" in build.events()
    check_app(build.build / "app", rows=2, seed=1)

    _edit(project / "BUILD.yaml", "[{kind: openblas}]", "[{kind: openblas, cflags: [-DEDIT]}]")
    events = build.events()
    assert buildgen_actions(events) == []
    assert _objects(events, "tiny/cpu") == ["openblas.c.o"]
    check_app(build.build / "app", rows=2, seed=1)
    assert build.events() == []
