"""A small two-model, two-target plan built without a manifest file or any compiling."""

from pathlib import Path

from buildgen.manifest import ModelSpec
from buildgen.ninja.actions import plan_build
from buildgen.ninja.context import GenContext, current_context
from buildgen.ninja.dyndep import write_missing_dyndeps
from buildgen.ninja.emit import emit
from buildgen.ninja.genfiles import gen_files
from buildgen.targets import resolve_target


def make_targets():
    return {
        "cpu": resolve_target("cpu", {"kind": "composite", "host": {"kind": "c", "opt_level": 2}}),
        "fast": resolve_target("fast", {"kind": "c", "opt_level": 3, "march": "x86-64-v3",
                                        "cflags": ["-DX=a b"]}),
    }


def host_objects(label: str) -> tuple[str, ...]:
    """The c module's objects of a target: one per ISA level for "cpu" (no march), one for
    "fast" (march pinned)."""
    variants = make_targets()[label.split("/")[1]].toolchain("c").variants
    return tuple(f"c.{v.level}.o" for v in variants) or ("c.o",)


def make_models(root: Path):
    return (
        ModelSpec("cnn", root / "models" / "cnn.onnx", (("image", (1, 3, 8, 8)),), ("cpu",), ()),
        ModelSpec(
            "mlp", root / "my $models" / "mlp.onnx", (("x", (2, 4)),), ("cpu", "fast"),
            (("/fc2/Gemm", "c"),),
        ),
    )


def make_context(root: Path, real: bool = False) -> GenContext:
    if real:
        return current_context(root / "BUILD.yaml", root, root / "build")
    return GenContext(
        manifest=root / "BUILD.yaml",
        root=root,
        build_dir=root / "build",
        python=("/usr/bin/python3",),
        version="9.9.9",
        include_dir=root / "pkg" / "include",
        generator_inputs=(root / "pkg" / "__init__.py", root / "rules", root / "rules" / "c.yaml"),
    )


def plan_and_files(root: Path):
    models, targets = make_models(root), make_targets()
    files = gen_files(models, targets)
    return plan_build(models, targets, make_context(root), tuple(files)), files


def write_planned_build(root: Path) -> Path:
    """The plan's build dir on disk: build.ninja, gen's files and the sources it reads."""
    plan, files = plan_and_files(root)
    for rel in ("BUILD.yaml", "pkg/__init__.py", "rules/c.yaml", "models/cnn.onnx",
                "my $models/mlp.onnx"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")
    build = root / "build"
    for rel, text in files.items():
        (build / rel).parent.mkdir(parents=True, exist_ok=True)
        (build / rel).write_text(text)
    (build / "build.ninja").write_text(emit(plan, "9.9.9"))
    write_missing_dyndeps(build, plan)  # as gen does
    return build
