"""The CMake fragment made from a BuildPlan, checked as data and as text (no cmake run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from buildgen.cmake.emit import emit_fragment
from buildgen.cmake.fragment import Fragment, fragment_from_plan, link_items
from buildgen.errors import BuildgenError
from buildgen.manifest import ModelSpec
from buildgen.ninja.actions import plan_build
from buildgen.ninja.context import GenContext
from buildgen.ninja.genfiles import gen_files
from buildgen.targets import resolve_target


def _context(root: Path) -> GenContext:
    return GenContext(
        manifest=root / "BUILD.yaml",
        root=root,
        build_dir=root / "build",
        python=("/usr/bin/python3",),
        version="9.9.9",
        include_dir=root / "pkg" / "include",
        generator_inputs=(root / "pkg" / "__init__.py", root / "rules" / "c.yaml"),
    )


def _fragment(root: Path, models: tuple[ModelSpec, ...] | None = None) -> Fragment:
    targets = {
        "cpu": resolve_target("cpu", {"kind": "composite",
                                      "host": {"kind": "c", "opt_level": 2, "march": "x86-64"}}),
        "fast": resolve_target("fast", {"kind": "c", "opt_level": 3, "march": "x86-64-v3",
                                        "cflags": ["-DX=a b"]}),
        "cpu_fast": resolve_target("cpu_fast", {"kind": "c"}),
    }
    if models is None:
        models = (
            ModelSpec("mlp", root / "my $models" / "mlp.onnx", (("x", (2, 4)),), ("cpu", "fast"),
                      ()),
        )
    used = {t: targets[t] for m in models for t in m.targets}
    ctx = _context(root)
    files = gen_files(models, used)
    return fragment_from_plan(plan_build(models, used, ctx, tuple(files)), models, ctx)


def test_import_belongs_to_the_model_everything_else_to_its_target(tmp_path: Path) -> None:
    fragment = _fragment(tmp_path)
    (model,) = fragment.models
    assert model.name == "buildgen_mlp_import"
    assert [c.comment for c in model.commands] == ["IMPORT mlp"]
    assert model.commands[0].depfile == "mlp/graph.json.d"
    assert [lib.static for lib in fragment.libraries] == ["buildgen_mlp_cpu", "buildgen_mlp_fast"]
    for lib, label in zip(fragment.libraries, ("mlp/cpu", "mlp/fast"), strict=True):
        comments = sorted(c.comment.split()[0] for c in lib.commands)
        assert comments == ["CODEGEN", "EXECUTOR", "KERNELS", "PARTITION", "REPORT"]
        assert all(o.startswith(label + "/") for c in lib.commands for o in c.outputs)
        assert (lib.shared, lib.export_name, lib.output_name) == (
            lib.static + "_shared", lib.static.removeprefix("buildgen_"), "mlp")
        assert lib.after == "buildgen_mlp_import"
        assert lib.link_items == ("-lm", "-pthread")


def test_sources_sharing_flags_share_an_object_library(tmp_path: Path) -> None:
    cpu, fast = _fragment(tmp_path).libraries
    module, executor, weights = cpu.groups
    assert (module.name, executor.name) == ("buildgen_mlp_cpu_c_objects",
                                            "buildgen_mlp_cpu_model_objects")
    for compiled in (module, executor):
        assert compiled.language == "C"
        assert "-O2" in compiled.flags
        assert compiled.includes == ("../pkg/include", "mlp/cpu/include")  # not -I flags
    assert [c.source for c in module.compiles] == ["mlp/cpu/src/c.c"]
    assert [c.source for c in executor.compiles] == ["mlp/cpu/src/model.c"]
    # The c module calls the shared kernels (_shared/c-<id>), the executor does not.
    assert "-DBG_KERNELS_LINKED" in module.flags and "-DBG_KERNELS_LINKED" not in executor.flags
    # Assembly has no CMake language: always the plan's own compile command.
    assert weights.language is None
    (asm,) = weights.compiles
    assert asm.command.argv[-4:] == ("-c", "mlp/cpu/src/weights.S", "-o", "mlp/cpu/obj/weights.o")
    assert "mlp/weights.bin" in asm.command.depends  # the .incbin'd file
    assert "-DX=a b" in fast.groups[0].flags and "-O3" in fast.groups[0].flags


def test_each_isa_level_compiles_in_an_object_library_of_its_own(tmp_path: Path) -> None:
    """Without march the c module is compiled once per level: its flags differ per level."""
    source = tmp_path / "m.onnx"
    models = (ModelSpec("a", source, (), ("cpu_fast",), ()),)
    (library,) = _fragment(tmp_path, models).libraries
    variants = resolve_target("cpu_fast", {"kind": "c"}).toolchain("c").variants
    for variant in variants:
        (group,) = [g for g in library.groups if f"-march={variant.level}" in g.flags]
        assert [c.source for c in group.compiles] == ["a/cpu_fast/src/c.c"]
        assert f"-DBG_ISA_SUFFIX={variant.suffix}" in group.flags
    executor = [g for g in library.groups if "a/cpu_fast/src/model.c" in
                [c.source for c in g.compiles]]
    assert len(executor) == 1 and not any(f.startswith("-march") for f in executor[0].flags)


def test_paths_are_relative_to_the_build_dir_and_the_text_is_deterministic(
    tmp_path: Path,
) -> None:
    text = emit_fragment(_fragment(tmp_path))
    assert text == emit_fragment(_fragment(tmp_path))
    # The build dir lies under the manifest's folder. buildgen's own kernels sources and
    # headers (here pkg/) are named absolute, so that their objects have one cache key in
    # every project (buildgen/ninja/shared_modules.py); nothing else is.
    assert str(tmp_path / "pkg" / "include") in text
    assert str(tmp_path) not in text.replace(str(tmp_path / "pkg" / "include"), "<pkg>")
    assert '"../my \\$models/mlp.onnx"' in text
    assert text.startswith("# buildgen CMake fragment format 2, generated by buildgen 9.9.9.")
    assert "cmake_policy(VERSION 3.20...3.31)" in text
    for helper in ("_buildgen_action(", "_buildgen_group(", "_buildgen_objects(",
                   "_buildgen_compile(", "_buildgen_library(", "_buildgen_configure_depends("):
        assert helper in text


def test_command_files_follow_their_commands(tmp_path: Path) -> None:
    fragment = _fragment(tmp_path)
    files = fragment.command_files()
    partition = files["cmake-fragment/commands/mlp/fast/partition.json.cmd"]
    assert partition.startswith("# buildgen command file format 1\n/usr/bin/python3 -m buildgen")
    assert "'-DX=a b'" in files["cmake-fragment/commands/mlp/fast/obj/c.o.cmd"]
    # Another input shape changes the import's command, hence its command file.
    moved = (ModelSpec("mlp", tmp_path / "my $models" / "mlp.onnx", (("x", (3, 4)),),
                       ("cpu", "fast"), ()),)
    other = _fragment(tmp_path, moved).command_files()
    changed = sorted(path for path in files if files[path] != other[path])
    assert changed == ["cmake-fragment/commands/mlp/graph.json.cmd"]


def test_names_that_collide_in_cmake_are_refused(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    models = (
        ModelSpec("a", source, (), ("cpu_fast",), ()),
        ModelSpec("a_cpu", source, (), ("fast",), ()),
    )
    with pytest.raises(BuildgenError, match="'buildgen_a_cpu_fast'"):
        _fragment(tmp_path, models)


def test_link_flags_become_link_items() -> None:
    assert link_items(("-L", "/opt/x/lib", "-l", "dnnl", "-Wl,-rpath,/opt/x/lib", "-lm")) == (
        "-L/opt/x/lib", "-ldnnl", "-Wl,-rpath,/opt/x/lib", "-lm")
    with pytest.raises(BuildgenError, match="-Xlinker"):
        link_items(("-Xlinker", "--as-needed"))
    with pytest.raises(BuildgenError, match="no value"):
        link_items(("-lm", "-L"))
