"""One build action as a REAPI action, and its result as files in the build dir.

The input root holds the source root, the build dir and buildgen's own package at fixed
places (`Layout`); the command runs in the build dir's place, so the relative paths
build.ninja writes work unchanged, and an absolute path into one of those three folders is
rewritten relative to it.

What is uploaded: the action's declared inputs and, for a compile, the headers a local
dependency scan (`cc -M`) names under those three folders; for a Python stage, the files
it names and buildgen's package (buildgen.remote.stages). Any other file the command reads
(the compiler, system and CUDA headers, libraries) is the *toolchain*: workers must have it
at the same path, which is what the platform properties select (document the image a
worker pool runs in them). The worker runs the command with a fixed environment: PATH and
the variables that change what a compiler does (buildgen.cache.keys.TOOL_ENVIRONMENT),
nothing else of this shell.

Which rules run remotely: buildgen.remote.rules.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from buildgen.cache.action import ActionSpec
from buildgen.cache.depfile import depfile_text, parse_depfile
from buildgen.cache.keys import TOOL_ENVIRONMENT, file_digest
from buildgen.cache.settings import REMOTE_STATE
from buildgen.remote.client import ExecutorClient, RemoteError
from buildgen.remote.protos import re_pb2
from buildgen.remote.rules import stage_arguments
from buildgen.remote.settings import ExecutorSettings
from buildgen.remote.slots import local_slot
from buildgen.remote.tree import Blob, InputFile, input_root, message_blob

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Words of a compile that name its outputs or dependency file: dropped for the scan.
_SCAN_DROP_WITH_VALUE = frozenset({"-o", "-MF", "-MT", "-MQ"})
_SCAN_DROP = frozenset({"-c", "-MD", "-MMD", "-MP"})


@dataclass(frozen=True)
class Layout:
    """Where the action's files sit in the input root: the same places on every machine.

    The source root is `src/`; the build dir is where it lies in the source root (as
    `src/build`), or `out/` when it lies elsewhere; buildgen's package is where it lies in
    the source root, or `buildgen/`. So relative paths between them that build.ninja
    writes hold in the input root, and two checkouts at different paths send the same
    action (the service's action cache serves both)."""

    build: str  # absolute, normalized
    bases: tuple[tuple[str, str], ...]  # (folder here, its place), longest folder first

    @classmethod
    def of(cls, build: str, root: str) -> Layout:
        build = os.path.normpath(os.path.abspath(build))
        root = os.path.normpath(os.path.join(build, root))
        places = {root: "src"}
        for folder, elsewhere in ((build, "out"), (PACKAGE_DIR, "buildgen")):
            inside = _under(folder, root)
            places.setdefault(folder, f"src/{os.path.relpath(folder, root)}" if inside
                              else elsewhere)
        # A checkout keeps rules/ and schemas/ beside the package: so does the input root.
        beside = os.path.dirname(places[PACKAGE_DIR])
        for folder in _package_data_folders():
            if not _under(folder, PACKAGE_DIR):
                places.setdefault(folder, os.path.join(beside, os.path.basename(folder)))
        bases = tuple(sorted(places.items(), key=lambda b: (-len(b[0]), b[0])))
        return cls(build, tuple((here, os.path.normpath(place)) for here, place in bases))

    @property
    def working_directory(self) -> str:
        return self._place_of(self.build) or ""

    def place(self, path: str) -> str | None:
        """A file's path in the input root (`path`: absolute or relative to the build dir),
        or None for a toolchain file, which is not uploaded."""
        return self._place_of(os.path.normpath(os.path.join(self.build, path)))

    def rewrite(self, word: str) -> str:
        """A command word with absolute paths into the uploaded folders made relative to
        the build dir's place (the worker's copy lives elsewhere)."""
        pattern = "|".join(re.escape(here) for here, _ in self.bases if here != "/")
        return re.sub(f"(?:{pattern})(?=/|$|[\\s:;,=])", self._relative, word)

    def localize(self, path: str) -> str:
        """A path the worker named (relative to its working directory) as this machine
        names it: relative to the build dir inside the source root, else absolute."""
        if os.path.isabs(path):
            return path
        placed = os.path.normpath(os.path.join(self.working_directory, path))
        for here, place in sorted(self.bases, key=lambda b: -len(b[1])):
            if placed == place or placed.startswith(place + "/"):
                local = os.path.normpath(here + placed[len(place):])
                root = next(h for h, p in self.bases if p == "src")
                if _under(local, root) and _under(self.build, root):
                    return os.path.relpath(local, self.build)
                return local
        return path

    def _place_of(self, absolute: str) -> str | None:
        for here, place in self.bases:
            if _under(absolute, here):
                rest = os.path.relpath(absolute, here)
                return place if rest == "." else f"{place}/{rest}".replace(os.sep, "/")
        return None

    def _relative(self, match: re.Match[str]) -> str:
        place = self._place_of(match.group(0))
        assert place is not None
        return os.path.relpath(place, self.working_directory or ".")


def _package_data_folders() -> tuple[str, ...]:
    from buildgen.resources import rules_dir, schemas_dir

    return (str(rules_dir()), str(schemas_dir()))


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@dataclass(frozen=True)
class RemoteRun:
    exit_code: int
    stdout: bytes
    stderr: bytes
    cached: bool  # the service answered from its action cache


def execute(spec: ActionSpec, settings: ExecutorSettings, build: str,
            environ: dict[str, str], *, skip_cache: bool = False) -> RemoteRun:
    """Run the action on a worker and write its outputs (and depfile) into the build dir,
    all or none. Raises RemoteError when the service could not run it. `skip_cache`: run it
    even where the service's action cache has a result (one that failed its check)."""
    layout = Layout.of(build, spec.root)
    command, extra_inputs = describe(spec, settings, layout, environ, Path(build))
    files = input_files(layout, (*spec.inputs, *extra_inputs))
    root, tree_blobs = input_root(files)
    command_blob = message_blob(command)
    action = re_pb2.Action(command_digest=command_blob.digest, input_root_digest=root.digest)
    action.timeout.FromSeconds(int(settings.timeout))
    action.platform.CopyFrom(command.platform)
    action_blob = message_blob(action)
    client = ExecutorClient(settings)
    try:
        client.upload([*tree_blobs, command_blob, action_blob])
        done = client.execute(action_blob, timeout=settings.timeout + 60, skip_cache=skip_cache)
        result = done.result
        stdout = console(client, result.stdout_raw, result.stdout_digest)
        stderr = console(client, result.stderr_raw, result.stderr_digest)
        if result.exit_code == 0:
            _write_outputs(client, spec, layout, result)
        return RemoteRun(result.exit_code, stdout, stderr, done.response.cached_result)
    finally:
        client.close()


def describe(spec: ActionSpec, settings: ExecutorSettings, layout: Layout,
             environ: dict[str, str], build: Path) -> tuple[re_pb2.Command, list[str]]:
    """The Command a worker runs, and the inputs it needs beyond the declared ones: a
    compile's headers, or a Python stage's files and buildgen's package
    (buildgen.remote.stages; raises LocalOnly when a stage cannot name its inputs)."""
    from buildgen.remote import stages

    arguments = stage_arguments(spec.command)
    if arguments is None:
        with local_slot(build / REMOTE_STATE, settings.local_jobs):  # the scan runs here
            headers = scan_headers(spec, environ)
        command = remote_command(spec, layout, environ, settings.platform_for(spec.kind))
        return command, headers
    extra = [*stages.stage_inputs(arguments), *stages.package_files()]
    command = remote_command(spec, layout, environ, stages.stage_platform(settings),
                             words=stages.stage_command(settings, arguments),
                             fixed=stages.stage_environment(layout))
    return command, extra


def remote_command(spec: ActionSpec, layout: Layout, environ: dict[str, str],
                   platform: Iterable[tuple[str, str]] = (), *,
                   words: Sequence[str] | None = None,
                   fixed: dict[str, str] | None = None) -> re_pb2.Command:
    """The command as the worker runs it: `words` (default: the action's), with PATH and
    the compiler-relevant variables of `environ` plus `fixed` (set as given); `platform`:
    the properties, sorted by name."""
    command = re_pb2.Command(
        arguments=[layout.rewrite(word) for word in (spec.command if words is None else words)],
        working_directory=layout.working_directory,
        output_paths=sorted(output_paths(spec)),
    )
    names = ("PATH", *TOOL_ENVIRONMENT)
    variables = {name: layout.rewrite(environ[name]) for name in names if name in environ}
    variables.update(fixed or {})
    for name in sorted(variables):
        command.environment_variables.add(name=name, value=variables[name])
    for name, value in platform:
        command.platform.properties.add(name=name, value=value)
    return command


def output_paths(spec: ActionSpec) -> list[str]:
    return [*spec.outputs, *([spec.depfile] if spec.depfile else [])]


def input_files(layout: Layout, paths: Iterable[str]) -> list[InputFile]:
    files: dict[str, InputFile] = {}
    for path in paths:
        place = layout.place(path)
        if place is None or place in files:
            continue
        local = os.path.join(layout.build, path)
        status = os.stat(local)
        blob = Blob(file_digest(local), status.st_size, path=local)
        files[place] = InputFile(place, blob, executable=bool(status.st_mode & 0o100))
    return list(files.values())


def scan_headers(spec: ActionSpec, environ: dict[str, str]) -> list[str]:
    """The files a compile includes, from the compiler's own dependency scan (`-M`): exact
    where a guess from -I folders would upload whole trees or miss a generated header."""
    if not spec.depfile:
        return []
    words = list(spec.command)
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _SCAN_DROP_WITH_VALUE:
            skip = True
        elif word not in _SCAN_DROP:
            kept.append(word)
    with tempfile.TemporaryDirectory(prefix="buildgen-scan-") as scratch:
        out = os.path.join(scratch, "deps.d")
        done = subprocess.run([*kept, "-M", "-MF", out], capture_output=True, env=environ,
                              check=False)
        if done.returncode != 0 or not os.path.exists(out):
            message = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            raise RemoteError(f"the dependency scan failed: {message[0]}", transient=False)
        with open(out) as f:
            return parse_depfile(f.read())


def console(client: ExecutorClient, raw: bytes, digest: re_pb2.Digest) -> bytes:
    if raw or not digest.hash:
        return bytes(raw)
    return client.read(digest)


def _write_outputs(client: ExecutorClient, spec: ActionSpec, layout: Layout,
                   result: re_pb2.ActionResult) -> None:
    """Fetch every output, checked, before writing any: a failure leaves no output behind
    that the build would trust."""
    wanted = output_paths(spec)
    got = {f.path: f for f in result.output_files}
    missing = [p for p in wanted if p not in got]
    if missing:
        raise RemoteError(f"the worker returned no {', '.join(missing)}", transient=False)
    fetched = [(p, client.read(got[p].digest), got[p].is_executable) for p in wanted]
    from buildgen.fsutil import write_atomic, write_if_changed

    for path, data, executable in fetched:
        if path == spec.depfile:
            data = _localized_depfile(spec, layout, data)
        if spec.restat and not executable:  # as the stage would: unchanged bytes keep
            write_if_changed(path, data)     # their mtime, and ninja's restat stops there
        else:
            write_atomic(path, data, executable=executable)


def _localized_depfile(spec: ActionSpec, layout: Layout, data: bytes) -> bytes:
    """The worker's depfile with its paths as this machine names them: ninja and the
    cache's key read it here."""
    deps = [layout.localize(p) for p in parse_depfile(data.decode())]
    return depfile_text(spec.outputs[0], deps).encode()

