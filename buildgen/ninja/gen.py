"""`buildgen gen`: manifest -> build.ninja plus the option files its actions read."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from buildgen.cache.settings import (
    SETTINGS_FILE,
    SettingsError,
    enabled_at_gen,
    settings_file_text,
)
from buildgen.errors import BuildgenError, Diagnostic
from buildgen.fsutil import write_atomic, write_if_changed
from buildgen.manifest import Manifest, load_manifest
from buildgen.manifest.sourcemap import sort_diagnostics
from buildgen.ninja.actions import plan_build
from buildgen.ninja.awaited_records import without_awaited_records
from buildgen.ninja.build_dir import checked_build_dir
from buildgen.ninja.context import InstallationProbe, current_context, start_probing
from buildgen.ninja.dyndep import write_missing_dyndeps
from buildgen.ninja.emit import emit
from buildgen.ninja.genfiles import gen_files
from buildgen.ninja.layout import BUILD_NINJA
from buildgen.targets import is_known_target, pool_depths, resolve_targets
from buildgen.targets.manifest_targets import target_definition_problems
from buildgen.worker.native import client_name, compiled_client


@dataclass(frozen=True)
class GenResult:
    manifest: Manifest
    build_dir: Path  # absolute
    build_ninja: Path
    changed: tuple[str, ...]  # files rewritten this time, relative to the build dir


def generate(manifest_path: Path, build_dir: Path | None = None,
             probe: InstallationProbe | None = None) -> GenResult:
    """Load and check the manifest, resolve its targets, write the build files.

    build.ninja is written last, so an interrupted gen never leaves a build.ninja that
    names option files which do not exist yet. `probe`: one the caller started earlier.
    """
    with _collector_paused():
        return _generate(manifest_path, build_dir, probe or start_probing())


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """gen makes about a million small objects (the manifest's values and positions, the
    plan's actions, build.ninja's lines) and keeps nearly all of them until it returns, so
    each pass of the cyclic collector walks a growing heap and frees nothing: ~10% of gen
    at 1,000 models. Reference counting still frees what gen drops."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _generate(manifest_path: Path, build_dir: Path | None, probe: InstallationProbe
              ) -> GenResult:
    try:
        manifest = load_manifest(manifest_path, is_known_target)
    except BuildgenError as exc:
        # The targets' own problems are found by resolving them, which needs a manifest
        # that loads; report them now too rather than after the others are fixed.
        seen = {(d.location, d.message) for d in exc.diagnostics}
        extra = [d for d in target_definition_problems(Path(manifest_path))
                 if (d.location, d.message) not in seen]
        if not extra:
            raise
        raise BuildgenError(sort_diagnostics([*exc.diagnostics, *extra])) from None
    targets = resolve_targets(manifest)
    out_dir = checked_build_dir(Path(os.path.abspath(build_dir or manifest.build_dir)),
                                manifest.root)
    ctx = current_context(manifest.path, manifest.root, out_dir, pool_depths(targets.values()),
                          probe)
    models, ctx = without_awaited_records(manifest.models, ctx)
    files = gen_files(models, targets)
    # The cache's settings go to a file the actions read, never into build.ninja.
    files[SETTINGS_FILE] = settings_file_text(manifest.cache, manifest.remote)
    try:
        cached = enabled_at_gen(manifest.cache)
    except SettingsError as exc:
        raise BuildgenError(Diagnostic(str(exc))) from None
    gen_outputs = tuple(files)
    programs = {}
    client = client_name() if ctx.worker else None
    if client is not None and not os.access(out_dir / client, os.X_OK):
        binary = compiled_client()
        client = client if binary is not None else None
        programs = {client: binary} if client and binary else {}
    if client is not None:  # an output of gen: ninja runs gen again if it goes missing
        ctx = dataclasses.replace(ctx, native_client=client)
        gen_outputs += (client,)
    plan = plan_build(models, targets, ctx, gen_outputs, cached=cached)
    files[BUILD_NINJA] = emit(plan, ctx.version)
    changed = _write_files(out_dir, files, programs)
    write_missing_dyndeps(out_dir, plan)
    return GenResult(manifest, out_dir, out_dir / BUILD_NINJA, changed)


def _write_files(out_dir: Path, files: dict[str, str],
                 programs: dict[str, bytes] | None = None) -> tuple[str, ...]:
    """Write what changed; returns those paths. The settings file, which marks the folder
    as buildgen's (build_dir.MARK), goes first: a gen stopped part-way (a full disk) leaves
    a folder the next build still accepts. `programs` (executables) follow it, and
    build.ninja stays last (see generate)."""
    mark = out_dir / SETTINGS_FILE
    marked = mark.exists()
    written = set()
    try:
        for path in sorted(files, key=lambda name: name != SETTINGS_FILE):
            if write_if_changed(out_dir / path, files[path]):
                written.add(path)
            if path == SETTINGS_FILE:
                for name, data in (programs or {}).items():
                    write_atomic(out_dir / name, data, executable=True)
    except OSError as exc:
        if not marked and not mark.exists():
            with contextlib.suppress(OSError):
                mark.parent.rmdir()  # created just now and empty: the folder stays unused
        where = exc.filename or out_dir
        raise BuildgenError(Diagnostic(f"cannot write {where}: {exc.strerror or exc}")) from None
    return tuple(path for path in files if path in written)
