"""`buildgen cmake`: manifest -> the option files and the CMake fragment.

What `buildgen gen` does for Ninja, done for CMake: the same manifest loading, target
resolution, option files and BuildPlan (buildgen.ninja.actions), then the plan is written as
a CMake fragment instead of build.ninja. buildgen_add_models() runs this at configure time
and adds the fragment's folder with add_subdirectory(), binary dir = the build dir, so that
relative paths in the plan, in the stages' depfiles and in the fragment all start at one
folder (CMake reads a custom command's depfile relative to CMAKE_CURRENT_BINARY_DIR).

In a cross build (CMAKE_CROSSCOMPILING) buildgen_add_models passes the project's toolchain
(`project`): the models' targets whose host names no triple build for it, with its compiler,
so that the objects CMake compiles, the ones the plan compiles (the weights) and the link
agree. A target whose own triple names another architecture than the project's could only
fail at link time, so it is an error here.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from buildgen.cmake.emit import emit_fragment
from buildgen.cmake.fragment import FRAGMENT_DIR, fragment_from_plan
from buildgen.errors import BuildgenError, Diagnostic
from buildgen.fsutil import write_if_changed
from buildgen.manifest import Manifest, ModelSpec, load_manifest
from buildgen.ninja.actions import plan_build
from buildgen.ninja.awaited_records import without_awaited_records
from buildgen.ninja.context import current_context
from buildgen.ninja.genfiles import gen_files
from buildgen.targets import ResolvedTarget, is_known_target, pool_depths, resolve_targets
from buildgen.targets.attributes import did_you_mean
from buildgen.targets.cross import ProjectToolchain, build_arch, host_triple, target_arch

FRAGMENT_FILE = f"{FRAGMENT_DIR}/CMakeLists.txt"


@dataclass(frozen=True)
class CMakeResult:
    build_dir: Path  # absolute
    fragment_dir: Path  # absolute: add_subdirectory(<this> <build_dir>)
    changed: tuple[str, ...]  # files rewritten this time, relative to the build dir


def generate_cmake(
    manifest_path: Path,
    build_dir: Path | None = None,
    models: Sequence[str] = (),
    targets: Sequence[str] = (),
    project: ProjectToolchain | None = None,
) -> CMakeResult:
    """Write the option files and the fragment for `models` x `targets` (empty: all);
    `project`: the CMake project's cross toolchain, which targets naming no triple follow.

    The fragment is written last, so an interrupted run never leaves one naming option
    files that do not exist yet.
    """
    manifest = load_manifest(manifest_path, is_known_target)
    chosen = select_models(manifest, models, targets)
    # Resolve what the chosen models use (their whole target lists, so that a problem is
    # located where it is written); models left out are not built, so not checked either.
    names = {m.name for m in chosen}
    resolved = resolve_targets(dataclasses.replace(
        manifest, models=tuple(m for m in manifest.models if m.name in names)
    ), project)
    used = {name: resolved[name] for model in chosen for name in model.targets}
    check_architectures(manifest, used, project)
    out_dir = Path(os.path.abspath(build_dir or manifest.build_dir))
    ctx = current_context(manifest.path, manifest.root, out_dir, pool_depths(used.values()))
    chosen, ctx = without_awaited_records(chosen, ctx)
    files = gen_files(chosen, used)
    plan = plan_build(chosen, used, ctx, tuple(files))
    fragment = fragment_from_plan(plan, chosen, ctx)
    files.update(fragment.command_files())
    files[FRAGMENT_FILE] = emit_fragment(fragment)
    changed = tuple(path for path, text in files.items() if write_if_changed(out_dir / path, text))
    return CMakeResult(out_dir, out_dir / FRAGMENT_DIR, changed)


def select_models(
    manifest: Manifest, models: Sequence[str], targets: Sequence[str]
) -> tuple[ModelSpec, ...]:
    """The manifest's models named in `models`, each keeping only the targets named in
    `targets` (an empty selection keeps all). A name that matches nothing is an error; a
    model left without targets is dropped, unless it was asked for by name."""
    known_models = [m.name for m in manifest.models]
    known_targets = {t for m in manifest.models for t in m.targets}
    problems = [
        Diagnostic(f"no model {name!r} in {manifest.path.name}",
                   hint=did_you_mean(name, known_models))
        for name in models if name not in known_models
    ]
    problems += [
        Diagnostic(f"no model in {manifest.path.name} is built for target {name!r}",
                   hint=did_you_mean(name, known_targets))
        for name in targets if name not in known_targets
    ]
    chosen: list[ModelSpec] = []
    for model in manifest.models:
        if models and model.name not in models:
            continue
        kept = tuple(t for t in model.targets if not targets or t in targets)
        if kept:
            chosen.append(dataclasses.replace(model, targets=kept))
        elif model.name in models:
            problems.append(Diagnostic(
                f"model {model.name!r} is built for {', '.join(model.targets)}, none of the "
                f"targets asked for ({', '.join(targets)})",
            ))
    if problems:
        raise BuildgenError(problems)
    if not chosen:
        raise BuildgenError(f"{manifest.path.name} declares no models")
    return tuple(chosen)


def check_architectures(
    manifest: Manifest, used: dict[str, ResolvedTarget], project: ProjectToolchain | None
) -> None:
    """Every target must build for the architecture the CMake project builds for: CMake
    compiles the generated C and links the libraries with the project's toolchain."""
    arch = project.arch if project else build_arch()
    problems = []
    for name, target in sorted(used.items()):
        triple = host_triple(target)
        if triple is None or target_arch(triple) == arch:
            continue
        what = (f"builds for {arch} with {project.origin}" if project
                else f"builds for this machine ({arch}; CMAKE_CROSSCOMPILING is off)")
        message = (f"target {name!r} builds for triple {triple!r} ({target_arch(triple)}), "
                   f"but this CMake project {what}; CMake compiles and links the model with "
                   "the project's toolchain")
        hint = (f"configure with a CMake toolchain file for {triple} (targets naming no "
                "triple follow it), leave the target out with buildgen_add_models(... "
                "TARGETS <others>), or build it with `buildgen build`")
        where = ("targets", name)
        known = any(spec.name == name for spec in manifest.targets)
        problems.append(manifest.diagnostic(where, message, hint) if known
                        else Diagnostic(message, hint=hint))
    if problems:
        raise BuildgenError(problems)
