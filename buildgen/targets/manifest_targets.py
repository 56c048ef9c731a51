"""The targets of a manifest: its `targets:` section, the registered names its models use,
and whether buildgen can build them. Every problem is located in the manifest.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from buildgen.errors import BuildgenError, Diagnostic, error
from buildgen.manifest import Manifest
from buildgen.manifest.sourcemap import sort_diagnostics
from buildgen.targets.attributes import did_you_mean
from buildgen.targets.compose import Composed
from buildgen.targets.cross import ProjectToolchain, compiler_install_hint, host_triple
from buildgen.targets.expand import Definition, Expander, Scope, Site
from buildgen.targets.model import ResolvedTarget
from buildgen.targets.registry import has_code_generator, registered_kinds
from buildgen.targets.resolve import resolve_definition, tag_definitions


class ManifestTargets:
    """Resolves a manifest's targets on demand, each once; problems accumulate. The targets
    named in `follow` build for `project` where their host names no triple."""

    def __init__(self, manifest: Manifest, project: ProjectToolchain | None = None,
                 follow: frozenset[str] = frozenset()):
        self.manifest = manifest
        self.project = project
        self.follow = follow
        self.definitions = {
            spec.name: Definition(spec.name, spec.data, Site(manifest, ("targets", spec.name)),
                                  "manifest")
            for spec in manifest.targets
        }
        self.expander = Expander(Scope(self.definitions, tag_definitions()))
        self._done: dict[str, Composed | None] = {}
        for spec in manifest.targets:
            if spec.name in registered_kinds():
                self.expander.problems.append(manifest.diagnostic(
                    ("targets", spec.name),
                    f"target name {spec.name!r} is the name of a target kind",
                    _rename_hint(spec.name, spec.data, set(self.definitions)), at_key=True,
                ))

    @property
    def problems(self) -> list[Diagnostic]:
        return self.expander.problems

    def resolve(self, name: str, use: Site | None = None) -> Composed | None:
        """`name` as a model (or `--show`) refers to it: the manifest's target of that name,
        else a registered kind or tag; `use` is where it is named."""
        if name not in self._done:
            definition = self.definitions.get(name)
            if definition is None:
                where = use or Site(self.manifest, ())
                definition = Definition(name, name, where, "model")
            project = self.project if name in self.follow else None
            self._done[name] = resolve_definition(self.expander, definition, project)
        return self._done[name]

    def buildability(self, used: dict[str, list[str]]) -> None:
        """Report, at gen time, every used target with a kind buildgen cannot generate code
        for, so the build fails here and not half-way through."""
        able = sorted(k for k in registered_kinds() if has_code_generator(k))
        for name, models in sorted(used.items()):
            composed = self._done.get(name)
            if composed is None:
                continue
            # Kinds written at one place (a tag brings several) make one message.
            by_site: dict[tuple[object, ...], list[str]] = {}
            for kind in composed.target.backends:
                if not has_code_generator(kind):
                    site = composed.site(kind)
                    by_site.setdefault((site.path, site.via), []).append(kind)
            self._cross_compiler_installed(name, composed)
            for kinds in by_site.values():
                what = (f"kind {kinds[0]!r} has" if len(kinds) == 1
                        else f"kinds {', '.join(map(repr, kinds))} have")
                self.expander.fail(
                    composed.site(kinds[0]),
                    f"{what} no code generator in this buildgen yet, so target {name!r} "
                    f"(used by {_models(models)}) cannot be built",
                    f"`buildgen targets --show {name}` still resolves it; kinds that build "
                    f"today: {', '.join(able)}",
                )


    def _cross_compiler_installed(self, name: str, composed: Composed) -> None:
        """A triple's compiler must be installed: checked at gen, where the manifest can
        be pointed at, rather than by every compile failing under ninja."""
        target = composed.target
        triple = host_triple(target)
        rule = registered_kinds()[target.host_kind].toolchain.cross
        if triple is None or rule is None:
            return
        compiler = str(dict(target.host.attrs).get(rule.compiler_attr) or "")
        if not compiler or shutil.which(compiler) is not None:
            return
        default = rule.compiler.format(triple=triple)
        hint = (compiler_install_hint(triple) if compiler == default else
                f"install {compiler!r}, or unset {rule.compiler_attr} to use {default}")
        self.expander.fail(
            composed.site(target.host_kind).at(rule.triple_attr),
            f"target {name!r} builds for triple {triple!r} with {compiler!r}, which is not "
            "installed (not an executable on PATH)",
            hint,
        )


def _rename_hint(name: str, data: object, taken: set[str]) -> str:
    """The fix as YAML: the same definition under a free name (`cpu: {kind: c}`)."""
    import yaml

    from buildgen.manifest import thaw
    from buildgen.targets.registry import registered_tags

    device = registered_kinds()[name].device
    wanted = {"cpu": "cpu", "cuda": "gpu"}.get(device, f"my-{name}")
    candidates = [wanted, f"my-{name}", *(f"my-{name}-{i}" for i in range(2, 100))]
    new = next(c for c in candidates
               if c not in taken and c not in registered_kinds() and c not in registered_tags())
    value = thaw(data)
    text = (value if isinstance(value, str) else
            yaml.safe_dump(value, default_flow_style=True, sort_keys=False,
                           width=float("inf")).strip())
    return (f"rename it, and write {new!r} where models name it ('{name}' alone already "
            f"means the kind):\n    targets:\n      {new}: {text}")


def _models(models: list[str]) -> str:
    names = ", ".join(repr(m) for m in models)
    return f"model {names}" if len(models) == 1 else f"models {names}"


def resolve_targets(
    manifest: Manifest, project: ProjectToolchain | None = None
) -> dict[str, ResolvedTarget]:
    """What gen builds: every target of the manifest, and the registered names its models
    use, by name. Raises one BuildgenError listing every problem, including a used target
    with a kind that has no code generator. With `project` (a CMake cross build's
    toolchain), the targets the models use build for it where their host names no triple;
    targets no model uses stay as written."""
    used_names = frozenset(name for model in manifest.models for name in model.targets)
    targets = ManifestTargets(manifest, project, used_names)
    for name in targets.definitions:
        targets.resolve(name)
    used: dict[str, list[str]] = {}
    for model in manifest.models:
        for index, name in enumerate(model.targets):
            use = Site(manifest, ("models", model.name, "targets", index))
            if targets.resolve(name, use) is not None:
                used.setdefault(name, []).append(model.name)
    targets.buildability(used)
    if targets.problems:
        raise BuildgenError(sort_diagnostics(targets.problems))
    resolved = {name: targets.resolve(name) for name in [*targets.definitions, *used]}
    return {name: c.target for name, c in sorted(resolved.items()) if c is not None}


def target_definition_problems(path: Path) -> list[Diagnostic]:
    """The problems of a manifest's target definitions alone, for a manifest whose other
    sections have problems too, so that one run reports both. Best effort: a manifest too
    broken to read the targets from gives none (its own errors say why)."""
    import contextlib

    from buildgen.manifest import load_yaml
    from buildgen.manifest.assemble import assemble

    with contextlib.suppress(BuildgenError):
        document = load_yaml(path)
        data = document.data
        if isinstance(data, dict) and isinstance(data.get("targets"), dict):
            only_targets = {"buildgen": 1, "targets": data["targets"]}
            manifest = assemble(only_targets, document.source_map, Path(os.path.abspath(path)))
            targets = ManifestTargets(manifest)
            for name in targets.definitions:
                targets.resolve(name)
            return list(targets.problems)
    return []


def resolve_manifest_target(manifest: Manifest, name: str) -> ResolvedTarget:
    """One target by name, as `buildgen targets --show` prints it: the manifest's, or a
    registered kind or tag. Resolving does not need a code generator."""
    targets = ManifestTargets(manifest)
    known = {*targets.expander.visible(None), *registered_kinds()}
    if name not in known:
        raise error(
            f"no target {name!r} in {manifest.path.name} and no registered kind or tag of "
            "that name",
            hint=did_you_mean(name, known),
        )
    composed = targets.resolve(name)
    if composed is None:  # problems elsewhere in the manifest do not hide a good target
        raise BuildgenError(sort_diagnostics(targets.problems) or f"cannot resolve {name!r}")
    return composed.target
