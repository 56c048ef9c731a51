"""Kernels shared by every model of a manifest (a kind's `shared_kernels:`, cutlass's here)
as CMake targets: one STATIC library built once, linked by each model's shared library and
folded into each model's static library, as build.ninja does.

Compiles run through a stand-in nvcc (bin/nvcc writes an empty object and a depfile and logs
what it compiled; headers and libraries are the real toolkit's), so the CMake build checks
what runs, and how often, in seconds instead of minutes of CUTLASS compiles. The project
enables C and CXX only, so CMake runs the plan's own nvcc commands.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cmake_helpers import REPO, CMakeBuild, cmake_params, pip_cmake
from stand_in_nvcc import CUDA, HAS_CUDA_HEADERS, stand_in_toolkit

from buildgen.cmake.emit import emit_fragment
from buildgen.cmake.fragment import Fragment
from buildgen.cmake.generate import generate_cmake
from buildgen.ninja.tool import ninja_binary

pytestmark = pytest.mark.skipif(
    not HAS_CUDA_HEADERS, reason="needs the CUDA toolkit's runtime headers at /usr/local/cuda")

MANIFEST = """\
buildgen: 1
targets:
  gpu:
    kind: composite
    host: {{kind: c}}
    device: {{kind: cuda, arch: sm_90, cuda_home: {home}}}
    accelerators: [{{kind: cutlass, split_k_slices: [1], find_first_valid: false}}]
models:
  a: {{source: {mlp}, inputs: {{x: [8, 512]}}, targets: [gpu]}}
  b: {{source: {mlp}, inputs: {{x: [8, 512]}}, targets: [gpu]}}
"""

CMAKELISTS = """\
cmake_minimum_required(VERSION 3.20)
project(kernels_app LANGUAGES C CXX)
find_package(buildgen CONFIG REQUIRED)
buildgen_add_models(MANIFEST BUILD.yaml)
"""


def _project(root: Path) -> Path:
    """Two models using cutlass, a stand-in toolkit at root/cuda; returns the manifest."""
    home = stand_in_toolkit(root / "cuda")
    manifest = root / "BUILD.yaml"
    manifest.write_text(MANIFEST.format(home=home, mlp=REPO / "examples" / "models" / "mlp.onnx"))
    (root / "CMakeLists.txt").write_text(CMAKELISTS)
    return manifest


def _fragment(manifest: Path, build: Path) -> tuple[Fragment, str]:
    """The fragment `buildgen cmake` writes (rebuilt here as data, from the same plan)."""
    from buildgen.cmake.fragment import fragment_from_plan
    from buildgen.cmake.generate import select_models
    from buildgen.manifest import load_manifest
    from buildgen.ninja.actions import plan_build
    from buildgen.ninja.context import current_context
    from buildgen.ninja.genfiles import gen_files
    from buildgen.targets import is_known_target, pool_depths, resolve_targets

    loaded = load_manifest(manifest, is_known_target)
    models = select_models(loaded, (), ())
    targets = resolve_targets(loaded)
    ctx = current_context(loaded.path, loaded.root, build, pool_depths(targets.values()))
    files = gen_files(models, targets)
    fragment = fragment_from_plan(plan_build(models, targets, ctx, tuple(files)), models, ctx)
    return fragment, emit_fragment(fragment)


def test_shared_kernels_are_one_static_library_every_model_links(tmp_path: Path) -> None:
    manifest = _project(tmp_path)
    fragment, text = _fragment(manifest, tmp_path / "build")
    # cutlass's shards, beside the c host's kernels (every c host has those)
    host, kernels = sorted(fragment.kernels, key=lambda k: k.directory)
    assert host.directory.startswith("_shared/c-") and not host.commands
    folder = kernels.directory
    assert folder.startswith("_shared/cutlass-")
    assert kernels.static == "buildgen_shared_" + folder.split("/")[1].replace("-", "_")
    assert kernels.output_name == "cutlass_kernels"
    assert [c.comment.split()[0] for c in kernels.commands] == ["KERNELS"]
    assert {"a/gpu/src/cutlass.kernels.json", "b/gpu/src/cutlass.kernels.json"} <= set(
        kernels.commands[0].depends)
    # The shards share their flags: one object library, CUDA when the project enables it.
    (group,) = kernels.groups
    assert group.language == "CUDA" and group.pool == "nvcc"
    assert [c.source for c in group.compiles] == [f"{folder}/shard_{i}.cu" for i in range(4)]
    # The codegen of both libraries writes the lists the kernels command reads.
    assert kernels.after == ("buildgen_a_gpu_generate", "buildgen_b_gpu_generate")
    for lib in fragment.libraries:
        assert lib.kernels == (kernels.static, host.static)
        sources = [c.source for g in lib.groups for c in g.compiles]
        assert f"{lib.directory}/src/cutlass.cu" in sources
        assert not [s for s in sources if s.startswith("_shared/")]
    # Declared once, before the libraries that add its objects.
    assert text.count("_buildgen_shared_kernels(") == 2
    assert text.index("_buildgen_shared_kernels(") < text.index("_buildgen_library(")
    assert text.count(f'KERNELS "{kernels.static}"') == 2
    # The command files cover the shared commands too, and the text is deterministic.
    assert f"cmake-fragment/commands/{folder}/shard_0.o.cmd" in fragment.command_files()
    assert _fragment(manifest, tmp_path / "build")[1] == text


@pytest.mark.slow
@pytest.mark.parametrize(("cmake", "generator"), cmake_params())
def test_cmake_builds_the_shared_kernels_once(tmp_path: Path, cmake: str, generator: str
                                             ) -> None:
    _project(tmp_path)
    build = CMakeBuild(cmake, generator, tmp_path, tmp_path / "build")
    build.configure()
    done = build.build_all()
    out = done.stdout
    assert out.count("KERNELS _shared/cutlass-") == 1
    # Each shard compiled once although two libraries use it (make included).
    log = (tmp_path / "cuda" / "compiled.log").read_text().split()
    shards = sorted(p for p in log if p.startswith("_shared/"))
    folder = shards[0].rsplit("/", 1)[0]
    assert shards == [f"{folder}/shard_{i}.cu" for i in range(4)]
    assert sorted(p for p in log if not p.startswith("_shared/")) == [
        "a/gpu/src/cuda.cu", "a/gpu/src/cutlass.cu", "b/gpu/src/cuda.cu", "b/gpu/src/cutlass.cu"]
    models = build.build / "buildgen"
    assert (models / folder / "libcutlass_kernels.a").is_file()
    for name in ("a", "b"):
        assert (models / name / "gpu" / f"lib{name}.so").is_file()
        # A model's static library stands alone: it holds the shard objects.
        members = subprocess.run(["ar", "t", str(models / name / "gpu" / f"lib{name}.a")],
                                 capture_output=True, text=True, check=True).stdout.split()
        assert {f"shard_{i}.o" for i in range(4)} | {"cutlass.o"} <= set(members)
    # Nothing changed, nothing runs.
    again = build.build_all().stdout
    assert "KERNELS" not in again and "NVCC" not in again and "Linking" not in again
    assert (tmp_path / "cuda" / "compiled.log").read_text().split() == log


def test_buildgen_cmake_writes_the_shared_command_files(tmp_path: Path) -> None:
    result = generate_cmake(_project(tmp_path), tmp_path / "build")
    written = sorted(p.rsplit("/", 1)[1] for p in result.changed
                     if p.startswith("cmake-fragment/commands/_shared/cutlass-"))
    # The kernels command is named after its first output, shard_0.cu.
    assert written == ["shard_0.cu.cmd", *(f"shard_{i}.o.cmd" for i in range(4))]
    assert all((result.build_dir / p).is_file() for p in result.changed)


@pytest.mark.skipif(pip_cmake() is None, reason="no cmake")
def test_two_calls_sharing_kernels_are_told_to_use_one_manifest(tmp_path: Path) -> None:
    manifest = _project(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "BUILD.yaml").write_text(manifest.read_text().replace("  a: ", "  c: ")
                                      .replace("  b: ", "  d: "))
    (tmp_path / "CMakeLists.txt").write_text(
        CMAKELISTS + "buildgen_add_models(MANIFEST other/BUILD.yaml BUILD_DIR other)\n")
    cmake = pip_cmake()
    assert cmake is not None
    build = CMakeBuild(cmake, "Ninja", tmp_path, tmp_path / "build")
    done = build.configure(check=False)
    assert done.returncode != 0
    assert "two buildgen_add_models() calls both make the CMake target buildgen_shared_cutlass_" \
        in " ".join(done.stderr.split())


@pytest.mark.skipif(pip_cmake() is None, reason="no cmake")
def test_two_calls_each_get_the_c_hosts_kernels(tmp_path: Path) -> None:
    """The c host's kernels are the same for every manifest: two calls, each its own copy."""
    mlp = REPO / "examples" / "models" / "mlp.onnx"
    for name, folder in (("a", tmp_path), ("b", tmp_path / "other")):
        folder.mkdir(exist_ok=True)
        (folder / "BUILD.yaml").write_text(
            "buildgen: 1\ntargets:\n  cpu: {kind: c, march: x86-64, opt_level: 1}\n"
            f"models:\n  {name}: {{source: {mlp}, inputs: {{x: [8, 512]}}, targets: [cpu]}}\n")
    (tmp_path / "CMakeLists.txt").write_text(
        CMAKELISTS + "buildgen_add_models(MANIFEST other/BUILD.yaml BUILD_DIR other)\n")
    cmake = pip_cmake()
    assert cmake is not None
    build = CMakeBuild(cmake, "Ninja", tmp_path, tmp_path / "build")
    build.configure()
    build.build_all()
    for name, where in (("a", "buildgen"), ("b", "other")):
        assert (build.build / where / name / "cpu" / f"lib{name}.so").is_file()


@pytest.mark.skipif(pip_cmake() is None or not (CUDA / "bin" / "nvcc").is_file(),
                    reason="needs cmake and nvcc")
def test_with_cuda_enabled_cmake_compiles_the_shards_as_one_object_library(
    tmp_path: Path,
) -> None:
    """Configure only (the real nvcc is CMake's CUDA compiler; compiling is minutes): the
    ninja commands CMake wrote link the shard objects it compiles into each library."""
    _project(tmp_path)
    lists = tmp_path / "CMakeLists.txt"
    lists.write_text(lists.read_text().replace("LANGUAGES C CXX", "LANGUAGES C CXX CUDA"))
    cmake = pip_cmake()
    assert cmake is not None
    build = CMakeBuild(cmake, "Ninja", tmp_path, tmp_path / "build")
    build.configure(f"-DCMAKE_CUDA_COMPILER={CUDA / 'bin' / 'nvcc'}")

    def linked(output: str) -> list[str]:
        done = subprocess.run([ninja_binary(), "-C", str(build.build), "-t", "commands",
                               output], capture_output=True, text=True, check=True)
        return done.stdout.splitlines()[-1].split()

    static, shared = linked("buildgen/a/gpu/liba.a"), linked("buildgen/a/gpu/liba.so")
    shards = [w for w in static if "_shard_0_objects.dir/_shared/cutlass-" in w]
    assert [s.rsplit("/", 1)[1] for s in shards] == [f"shard_{i}.cu.o" for i in range(4)]
    assert [w for w in shared if w.endswith("/libcutlass_kernels.a")]
    assert not [w for w in shared if "shard_" in w]
    assert not [w for w in static if w.endswith(".a") and "kernels" in w]


@pytest.mark.slow
@pytest.mark.skipif(pip_cmake() is None, reason="no cmake")
def test_a_model_whose_kernels_exist_compiles_no_shard(tmp_path: Path) -> None:
    """Ninja's restat, under CMake too: a second model with the same layers rewrites no shard
    (the kernels command leaves them untouched), so nothing of the shared library compiles."""
    manifest = _project(tmp_path)
    both = manifest.read_text()
    manifest.write_text("\n".join(line for line in both.splitlines()
                                  if not line.startswith("  b: ")) + "\n")
    cmake = pip_cmake()
    assert cmake is not None
    build = CMakeBuild(cmake, "Ninja", tmp_path, tmp_path / "build")
    build.configure()
    build.build_all()
    log = tmp_path / "cuda" / "compiled.log"
    first = log.read_text().split()
    assert len([p for p in first if p.startswith("_shared/")]) == 4
    manifest.write_text(both)  # re-runs configure inside the build
    out = build.build_all().stdout
    assert "KERNELS _shared/cutlass-" in out
    compiled = sorted(log.read_text().split()[len(first):])
    assert compiled == ["b/gpu/src/cuda.cu", "b/gpu/src/cutlass.cu"]
    assert "Linking C shared library buildgen/b/gpu/libb.so" in out
