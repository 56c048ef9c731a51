"""Turn the manifest's target declarations into ResolvedTargets, validating every attribute once."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema

from buildgen.errors import BuildgenError, Diagnostic, SourceLocation
from buildgen.targets.kinds import TargetKind, registered_kinds
from buildgen.targets.model import ResolvedTarget, TargetInstance

Path = tuple[str | int, ...]
Locate = Callable[[Path], "SourceLocation | None"]
DEFAULT_HOST = "c"


class _Resolver:
    def __init__(self, locate: Locate):
        self.locate = locate
        self.diagnostics: list[Diagnostic] = []

    def fail(self, path: Path, message: str, hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(message, self.locate(path), hint))

    def kind(self, name: Any, path: Path) -> TargetKind | None:
        kinds = registered_kinds()
        if isinstance(name, str) and name in kinds:
            return kinds[name]
        close = difflib.get_close_matches(str(name), list(kinds), n=1)
        self.fail(
            path,
            f"{_dotted(path)}: unknown target kind {name!r}; known kinds: {', '.join(sorted(kinds))}",
            f"did you mean {close[0]!r}?" if close else None,
        )
        return None

    def instance(self, data: Any, path: Path) -> TargetInstance | None:
        if isinstance(data, str):
            data = {"kind": data}
        if not isinstance(data, Mapping):
            self.fail(path, f"{_dotted(path)}: expected a kind name or a mapping with 'kind'")
            return None
        kind = self.kind(data.get("kind"), (*path, "kind") if "kind" in data else path)
        if kind is None:
            return None
        validator = jsonschema.Draft202012Validator(kind.schema)
        for err in sorted(validator.iter_errors(dict(data)), key=lambda e: list(e.path)):
            self._attribute_error(kind, err, path)
        attrs = {**kind.defaults(), **{k: v for k, v in data.items() if k != "kind"}}
        return TargetInstance.make(kind.name, attrs)

    def _attribute_error(self, kind: TargetKind, err: Any, path: Path) -> None:
        if err.validator == "additionalProperties":
            allowed = [a.name for a in kind.attributes]
            for key in sorted(set(err.instance) - set(err.schema.get("properties", {}))):
                close = difflib.get_close_matches(key, allowed, n=1)
                self.fail(
                    (*path, key),
                    f"{_dotted(path)}: unknown attribute {key!r} for kind {kind.name!r}",
                    f"did you mean {close[0]!r}?" if close else f"valid: {', '.join(allowed)}",
                )
            return
        where = (*path, *err.path)
        self.fail(where, f"{_dotted(where)}: {err.message}")


def _dotted(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def resolve_target(name: str, data: Any, locate: Locate = lambda _p: None) -> ResolvedTarget:
    """Resolve one manifest target (`targets.<name>`) or a bare kind name."""
    resolver = _Resolver(locate)
    path: Path = ("targets", name)
    resolved = _resolve(resolver, name, data, path)
    if resolver.diagnostics or resolved is None:
        raise BuildgenError(resolver.diagnostics or [Diagnostic(f"cannot resolve target {name!r}")])
    return resolved


def _resolve(r: _Resolver, name: str, data: Any, path: Path) -> ResolvedTarget | None:
    host_path: Path = (*path, "host")
    if isinstance(data, str) or (isinstance(data, Mapping) and data.get("kind") != "composite"):
        # A bare kind (`cpu: c` or `cpu: {kind: c, opt_level: 2}`) is a composite of one host.
        data, host_path = {"kind": "composite", "host": data}, path
    if not isinstance(data, Mapping):
        r.fail(path, f"{_dotted(path)}: expected a kind name or a mapping with 'kind'")
        return None
    host = r.instance(data.get("host", DEFAULT_HOST), host_path)
    if host is not None and registered_kinds()[host.kind].is_external_codegen:
        r.fail(host_path, f"{_dotted(host_path)}: {host.kind!r} cannot be a host")
    device = r.instance(data["device"], (*path, "device")) if data.get("device") else None
    accelerators: list[TargetInstance] = []
    for i, acc in enumerate(data.get("accelerators") or ()):
        inst = r.instance(acc, (*path, "accelerators", i))
        if inst is not None:
            accelerators.append(inst)
    if host is None:
        return None
    return ResolvedTarget(name, host, device, tuple(accelerators))


def is_known_target(name: str) -> bool:
    """A bare name usable in a model's `targets:` without a manifest definition."""
    kind = registered_kinds().get(name)
    return kind is not None and not kind.is_external_codegen


def resolve_targets(manifest: Any) -> dict[str, ResolvedTarget]:
    """Every target the manifest's models use, by name; all problems reported at once.

    A model may name a target defined under `targets:` or a bare registered kind.
    """
    resolver = _Resolver(manifest.locate)
    resolved: dict[str, ResolvedTarget] = {}
    for spec in manifest.targets:
        target = _resolve(resolver, spec.name, spec.data, ("targets", spec.name))
        if target is not None:
            resolved[spec.name] = target
    for model in manifest.models:
        for name in model.targets:
            if name not in resolved and is_known_target(name):
                target = _resolve(resolver, name, name, ("models", model.name, "targets"))
                if target is not None:
                    resolved[name] = target
    if resolver.diagnostics:
        raise BuildgenError(resolver.diagnostics)
    return resolved
