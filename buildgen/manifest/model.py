"""The manifest as the rest of buildgen sees it: validated, resolved, immutable.

Paths are absolute (relative ones start at the manifest's folder). Mapping order in YAML
carries no meaning, so models, targets, inputs and pins are sorted by name: reordering a
manifest changes no output. A model's ``targets`` list keeps its order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from buildgen.errors import Diagnostic, SourceLocation
from buildgen.manifest.sourcemap import NodePath, SourceMap


@dataclass(frozen=True)
class PartitionOptions:
    """How a model is partitioned; a model's own options override the manifest's defaults."""

    policy: str = "priority"  # "priority" or "cost"
    records: Path | None = None  # tuning records the cost policy reads
    file: Path | None = None  # a partition file
    step: str | None = None  # "module:function" rewriting the partition


@dataclass(frozen=True)
class CacheOptions:
    """The manifest's `cache:` section; environment variables override it at run time
    (buildgen.cache.settings). Unset values take the cache's defaults."""

    enabled: bool = True
    dir: Path | None = None  # absolute
    max_size: int | None = None  # bytes
    remote: str | None = None
    read_only: bool = False


@dataclass(frozen=True)
class RemoteOptions:
    """The manifest's `remote:` section: a Remote Execution API service that runs actions
    (buildgen.remote.settings; environment variables override it at run time). Paths are
    absolute; no secret is ever here, only the files that hold them."""

    executor: str
    instance: str = ""
    platform: tuple[tuple[str, str], ...] = ()  # sorted by name
    jobs: int | None = None
    local_jobs: int | None = None  # of those, at most this many on this machine at once
    timeout: float | None = None  # s an action may take on a worker
    token_file: Path | None = None
    tls: tuple[tuple[str, Path], ...] = ()  # ca / cert / key -> a PEM file

    def section(self) -> dict[str, object]:
        """As the build's settings file keeps it."""
        section: dict[str, object] = {"executor": self.executor, "instance": self.instance,
                                      "platform": dict(self.platform)}
        if self.jobs is not None:
            section["jobs"] = self.jobs
        if self.local_jobs is not None:
            section["local_jobs"] = self.local_jobs
        if self.timeout is not None:
            section["timeout"] = self.timeout
        if self.token_file is not None:
            section["token_file"] = str(self.token_file)
        if self.tls:
            section["tls"] = {name: str(path) for name, path in self.tls}
        return section


@dataclass(frozen=True)
class ModelSpec:
    name: str  # a C identifier: it prefixes the model's C API
    source: Path  # absolute
    inputs: tuple[tuple[str, tuple[int, ...]], ...]  # input name -> shape, sorted by name
    targets: tuple[str, ...]  # in the order written
    pins: tuple[tuple[str, str], ...]  # node name or pattern -> target, sorted by pattern
    partition: PartitionOptions = PartitionOptions()
    location: SourceLocation | None = None  # the model's key in the manifest

    def input_shape(self, name: str) -> tuple[int, ...] | None:
        return dict(self.inputs).get(name)


@dataclass(frozen=True)
class TargetSpec:
    """A target as written: a kind or tag name, or a read-only mapping (FrozenDict).

    Its attributes are checked against the kind's schema by the targets stage;
    buildgen.manifest.thaw() gives a mutable copy.
    """

    name: str
    data: Any  # str | FrozenDict
    location: SourceLocation | None = None  # the target's key in the manifest


@dataclass(frozen=True)
class Manifest:
    path: Path  # absolute
    root: Path  # the manifest's folder; relative paths in it start here
    build_dir: Path  # absolute
    models: tuple[ModelSpec, ...]  # sorted by name
    targets: tuple[TargetSpec, ...]  # sorted by name
    partition: PartitionOptions = PartitionOptions()  # defaults the models started from
    cache: CacheOptions = CacheOptions()
    remote: RemoteOptions | None = None
    locations: SourceMap | None = field(default=None, compare=False, repr=False)

    def model(self, name: str) -> ModelSpec:
        for model in self.models:
            if model.name == name:
                return model
        raise KeyError(name)

    def target(self, name: str) -> TargetSpec:
        for target in self.targets:
            if target.name == name:
                return target
        raise KeyError(name)

    def locate(self, path: NodePath) -> SourceLocation | None:
        """Where the value at ``path`` (e.g. ``("targets", "gpu", "device", "arch")``) is
        written, or its nearest written ancestor."""
        return self.locations.locate(path) if self.locations else None

    def diagnostic(
        self, path: NodePath, message: str, hint: str | None = None, *, at_key: bool = False
    ) -> Diagnostic:
        """A diagnostic ``<dotted path>: <message>`` pointing into the manifest, for stages
        that find problems in what the manifest says (unknown attribute, bad option)."""
        if self.locations is None:
            return Diagnostic(message, None, hint)
        return self.locations.diagnostic(path, message, hint, at_key=at_key)
