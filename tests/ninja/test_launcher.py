"""compiler_launcher in the build: it prefixes the compiles of its toolchain and nothing else,
and a real build runs under it (a recording script here, ccache where it is installed)."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from plan_helpers import make_context
from small_project import write_project

from buildgen.cli import main
from buildgen.manifest import ModelSpec
from buildgen.ninja.actions import plan_build
from buildgen.ninja.emit import emit
from buildgen.ninja.genfiles import gen_files
from buildgen.targets import get_kind, resolve_target


def _edges(build_ninja: str) -> dict[str, str]:
    """Each build statement's first output -> its text (statement line plus variables)."""
    blocks = re.split(r"\n(?=build )", build_ninja)
    return {b.split(":", 1)[0].removeprefix("build ").split(" ")[0]: b for b in blocks
            if b.startswith("build ")}


def _c_objects() -> tuple[str, ...]:
    """The c module's objects without march: one per ISA level of this machine (or one)."""
    variants = resolve_target("plain", {"kind": "c"}).toolchain("c").variants
    return tuple(f"c.{v.level}.o" for v in variants) or ("c.o",)


def _kernel_objects(build_dir: Path) -> int:
    """How many shared kernels objects a build of the tiny model compiles (rules/c.yaml):
    the eager sources and those its library links, each at each level."""
    spec = get_kind("c").shared_kernels
    assert spec is not None
    linked = (build_dir / "tiny" / "cpu" / "src" / "c.link.rsp").read_text().split()
    eager = {Path(source).stem for source in spec.eager}
    late = {Path(obj).name.split(".")[0] for obj in linked} - eager
    return (len(eager) + len(late)) * len(_c_objects())


def test_the_launcher_comes_before_the_compiler_on_compile_edges_only(tmp_path):
    targets = {
        "cached": resolve_target(
            "cached", {"kind": "c", "opt_level": 2, "compiler_launcher": ["env", "A=1"]}
        ),
        "plain": resolve_target("plain", {"kind": "c", "opt_level": 2}),
    }
    model = ModelSpec("mlp", tmp_path / "mlp.onnx", (("x", (2, 4)),), ("cached", "plain"), ())
    files = gen_files((model,), targets)
    edges = _edges(emit(plan_build((model,), targets, make_context(tmp_path), tuple(files)),
                        "9.9.9"))
    for obj in (*_c_objects(), "model.o"):
        assert "\n  cc = env A=1 cc\n" in edges[f"mlp/cached/obj/{obj}"]
        assert "\n  cc = cc\n" in edges[f"mlp/plain/obj/{obj}"]
    # weights.S pulls weights.bin in with .incbin, which a launcher's cache cannot see.
    assert "\n  cc = cc\n" in edges["mlp/cached/obj/weights.o"]
    assert "\n  ld = cc\n" in edges["mlp/cached/libmlp.so"]
    assert "env" not in edges["mlp/cached/libmlp.a"]


@pytest.fixture(autouse=True)
def _compiles_run(monkeypatch):
    """buildgen's own action cache would restore compiles without running any launcher."""
    monkeypatch.setenv("BUILDGEN_CACHE", "off")


def test_a_build_runs_each_compile_under_the_launcher(tmp_path):
    log = tmp_path / "launched.txt"
    launcher = tmp_path / "bin" / "record-launch"
    launcher.parent.mkdir()
    launcher.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "$@"\n')
    launcher.chmod(0o755)
    manifest = write_project(tmp_path / "project", [str(launcher)])
    assert main(["build", "--manifest", str(manifest), "--build-dir", str(tmp_path / "b")]) == 0
    lines = log.read_text().splitlines()
    assert not [line for line in lines if "-shared" in line]  # the link ran without it
    # Compiles (`-c`); the action cache may also have asked the launcher its `--version`.
    launched = sorted(line.split(" -o ")[-1] for line in lines if " -c " in f" {line} ")
    kernels = [o for o in launched if o.startswith("_shared/")]
    assert len(kernels) == _kernel_objects(tmp_path / "b")
    assert [o for o in launched if o not in kernels] == sorted(
        f"tiny/cpu/obj/{o}" for o in (*_c_objects(), "model.o"))
    assert (tmp_path / "b" / "tiny" / "cpu" / "libtiny.so").is_file()


def _ccache_stats(env: dict[str, str]) -> dict[str, int]:
    done = subprocess.run(["ccache", "--print-stats"], env=env, capture_output=True, text=True,
                          check=True)
    return {k: int(v) for k, v in (line.split("\t") for line in done.stdout.splitlines())}


# CI (.ci/run installs ccache) sets CI: there a missing ccache fails the test, not skips it.
@pytest.mark.skipif(shutil.which("ccache") is None and not os.environ.get("CI"),
                    reason="ccache is not installed (apt-get install ccache)")
def test_a_second_build_in_a_fresh_build_dir_hits_ccache(tmp_path, monkeypatch):
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    env = dict(os.environ)
    manifest = write_project(tmp_path / "project", ["ccache"])

    def build(name: str) -> bytes:
        build_dir = tmp_path / name
        assert main(["build", "--manifest", str(manifest), "--build-dir", str(build_dir)]) == 0
        return (build_dir / "tiny" / "cpu" / "libtiny.so").read_bytes()

    first = build("first")
    # model.c, c.c once per ISA level, and the shared kernels
    compiles = 1 + len(_c_objects()) + _kernel_objects(tmp_path / "first")
    cold = _ccache_stats(env)
    assert cold["cache_miss"] == compiles and cold["direct_cache_hit"] == 0
    second = build("second")
    warm = _ccache_stats(env)
    # Every compile (model.c and each of c.c's) came from the cache: no new misses.
    assert warm["direct_cache_hit"] + warm["preprocessed_cache_hit"] == compiles
    assert warm["cache_miss"] == compiles
    assert second == first
    summary = subprocess.run(["ccache", "-s"], env=env, capture_output=True, text=True)
    assert re.search(rf"Hits:\s+{compiles} /\s+{2 * compiles}", summary.stdout), summary.stdout
