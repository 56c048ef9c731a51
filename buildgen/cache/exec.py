"""`python -m buildgen.cache exec ... -- <command>`: run one action through the cache.

Look the action up (local store, the kernels compiled at install time, then the remote
cache: buildgen/cache/prebuilt.py); on a hit, write its outputs and
its depfile without running the tool; otherwise run the command and, when it succeeds,
store its outputs (and push them to the remote unless it is read-only). A failing command
stores nothing. The cache never fails a build: anything wrong with it (a missing blob, a
full disk, an unreachable server) makes the action run as if there were no cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from buildgen.cache import journal, stats
from buildgen.cache.action import (
    ActionSpec,
    UsageError,
    hidden_digests,
    hidden_inputs,
    key_parts,
    output_name,
    parse_exec_args,
)
from buildgen.cache.command import ArchiveStaging, Ran, Running, echo, run_command, start_command
from buildgen.cache.depfile import depfile_text, parse_depfile
from buildgen.cache.depsets import DepSets
from buildgen.cache.keys import KeyParts, PathFrame, base_key, full_key
from buildgen.cache.model import ActionResult, OutputFile
from buildgen.cache.restore import restore
from buildgen.cache.settings import REMOTE_STATE, CacheSettings, SettingsError, load_settings
from buildgen.cache.store import LocalStore
from buildgen.cache.tools import Memo
from buildgen.errors import os_error
from buildgen.fsutil import read_file
from buildgen.remote.rules import LocalOnly, sent_remotely

if TYPE_CHECKING:
    from buildgen.cache.model import RemoteStore

# Takes work to run once the action's client has its reply (buildgen/cache/write_behind.py).
Later = Callable[[Callable[[], None]], None]

# What a command printed is kept with its outputs under these reserved names (no action
# writes under .buildgen/), and printed again on a hit: a compiler's warnings do not vanish
# because the object came from the cache.
CONSOLE = (".buildgen/console/stdout", ".buildgen/console/stderr")
ENV_EXPLAIN = "BUILDGEN_CACHE_EXPLAIN"  # =1: write each action's key document
EXPLAIN_DIR = ".buildgen/keys"  # <build>/.buildgen/keys/<first output>.json


def main(argv: Sequence[str], later: Later | None = None, own_group: bool = False) -> int:
    """The action's exit status. With `later`, the stores and statistics are handed to it
    to run after the reply (buildgen/cache/write_behind.py); without, they run here.
    `own_group`: this process leads a process group of its own, holding nothing but what
    it starts (a worker's runner): a command started before its lookup can be stopped."""
    try:
        spec = parse_exec_args(argv)
    except UsageError as exc:
        print(f"python -m buildgen.cache exec: error: {exc}", file=sys.stderr)
        return 2
    build = Path.cwd()
    started = time.monotonic()
    try:
        settings = load_settings(build)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if settings.enabled:
        try:
            action = CachedAction(spec, settings, build, later, own_group)
        except Exception as exc:
            # buildgen.errors is imported only here: every action pays for its imports.
            from buildgen.errors import BuildgenError

            if not isinstance(exc, BuildgenError):
                raise
            print(exc.render(), file=sys.stderr)  # a remote-cache URL or credential setting
            return 1
        try:
            outcome, code = action.execute()
        except KeyboardInterrupt:  # ninja was interrupted: it reports that, not a traceback
            return 130
        except OSError as exc:  # the build folder cannot be written (a full or failing disk)
            print(os_error(exc).render(), file=sys.stderr)
            outcome, code = "ran", 1
    else:
        outcome, code = "ran", run_command(spec).code
    entry = journal.Entry(
        rule=spec.rule, stage=journal.RULE_STAGES.get(spec.rule, spec.rule),
        output=spec.outputs[0], outcome=outcome, seconds=time.monotonic() - started,
        exit_code=code,
    )  # fmt: skip

    def report() -> None:
        with contextlib.suppress(OSError):  # the journal is a report, never a reason to fail
            journal.append(build, entry)

    if later is None:
        report()
    else:  # after the reply, as the stores: `buildgen build` reads it once they are written
        later(report)
    return code


class CachedAction:
    def __init__(self, spec: ActionSpec, settings: CacheSettings, build: Path,
                 later: Later | None = None, own_group: bool = False):
        self.spec = spec
        self.later = later
        self.own_group = own_group
        self.settings = settings
        self.build = build
        self.frame = PathFrame.of(str(build), spec.root)
        self.store = LocalStore(settings.dir)
        self.prebuilt = LocalStore(settings.prebuilt) if settings.prebuilt else None
        self.memo = Memo(settings.dir / "memo")
        self.remote = _open_remote(settings, build)
        self.added = 0  # bytes stored locally by this action
        # The remote had an entry for this action that could not be restored (a blob missing
        # or failing verification): after running, upload every output again, overwriting.
        self.heal = False
        # (name, digest) of the hidden inputs the action's full key covers, once known
        self.hidden: Sequence[tuple[str, str]] | None = None

    def execute(self) -> tuple[str, int]:
        """(outcome, exit status): outcome is "local", "remote" or "ran"."""
        ArchiveStaging.clear(self.spec)
        names = [output_name(p) for p in self.spec.outputs]
        if None in names:
            return "ran", run_command(self.spec).code
        early = self._started_early()
        try:
            return self._execute(early)
        except BaseException:
            if early is not None:
                early.stop()  # an interrupt reached it too; a bug here: no more of the action
            raise

    def _execute(self, early: Running | None) -> tuple[str, int]:
        try:
            parts = key_parts(self.spec, self.frame, self.memo)
        except OSError:  # an unreadable tool or input: no key
            return "ran", (early or start_command(self.spec)).finish().code
        base = base_key(parts)
        depsets = DepSets(base, self.store, self.remote, self.spec.depfile is not None,
                          self.prebuilt)
        outcome = self._lookup(base, depsets, early)
        code = 0
        saved: _Saved | None = None
        if outcome is None:
            if early is not None and not early.stopped:
                outcome, ran = "ran", early.finish()
            else:
                outcome, ran = self._run()
            code = ran.code
            if code == 0:
                saved = self._saved(base, ran.console)

        def finish(outcome: str = outcome) -> None:
            if saved is not None:
                self._store(saved, depsets)
            self._account(outcome)

        # A remote upload reads the outputs again from the build folder: not after a reply.
        if self.later is None or self.remote is not None:
            finish()
        else:
            self.later(finish)
        if os.environ.get(ENV_EXPLAIN):
            self._explain(parts, base, outcome)
        return outcome, code

    def _started_early(self) -> Running | None:
        """The command, started before the lookup when a miss is what to expect; a hit
        stops it. Ninja runs an action whose output is there only because an input or the
        command changed since it made it: after an edit, whose result no cache holds yet.
        The key and the lookup then run beside the compile instead of before it: 0.4 ms
        less a miss (a tiny model's model.c, 30-37 ms, this 2-core VM: runs with and
        without alternated), where the whole wrapper costs 2-3 ms. A hit with the output
        there (a branch checked out again) pays ~1 ms for a compile started and stopped
        (bench/bench_overhead.py: "hit, output there").

        Only where stopping it is safe: in a group of its own (`own_group`), for a command
        that leaves nothing but its outputs when stopped (`--stoppable`: a C or C++
        compile, Toolchain.stoppable), and without an executor or a remote cache, which
        may answer instead."""
        spec = self.spec
        if (not self.own_group or not spec.stoppable or self.remote is not None
                or self.settings.executor is not None or not os.path.exists(spec.outputs[0])):
            return None
        return start_command(spec, capture=True)

    def _run(self) -> tuple[str, Ran]:
        """Run the action on the executor when there is one, else (or when it fails) here.
        The outcome: "executed" (on a worker), "remote" (the executor's action cache had
        it), "fallback" (the executor failed: run here) or "ran"."""
        executor = self.settings.executor
        if executor is None:
            return "ran", run_command(self.spec, capture=True)
        from buildgen.remote.slots import local_slot

        state = self.build / REMOTE_STATE

        def here(outcome: str) -> tuple[str, Ran]:
            with local_slot(state, executor.local_jobs):
                return outcome, run_command(self.spec, capture=True)

        if not sent_remotely(self.spec.rule, self.spec.command, executor):
            return here("ran")
        from buildgen.remote.run import run_remotely

        try:
            done = run_remotely(self.spec, executor, self.build, state, dict(os.environ))
        except LocalOnly:
            return here("ran")
        if done is None:
            return here("fallback")
        echo(done.stdout, done.stderr)
        return ("remote" if done.cached else "executed"), Ran(
            done.exit_code, (done.stdout, done.stderr))

    # -- hits ------------------------------------------------------------------------------

    def _lookup(self, base: str, depsets: DepSets, early: Running | None = None) -> str | None:
        """Where the hit came from: "local" (the local store or the prebuilt one: both
        are this machine's disk) or "remote"; None on a miss. A hit stops `early` before
        it writes an output."""
        for where in ("local", "prebuilt", "remote"):
            if (where == "prebuilt" and self.prebuilt is None
                    or where == "remote" and self.remote is None):
                continue
            for names in depsets.candidates(where):
                hidden = hidden_digests(self.frame, names)
                if hidden is None:
                    continue
                key = full_key(base, hidden)
                if self._restore(key, where, early):
                    self.hidden = hidden
                    self._write_depfile(names)
                    if where == "remote":  # the next lookup finds the set locally
                        with contextlib.suppress(OSError):
                            self.added += depsets.record(names, push=False)
                    return "local" if where == "prebuilt" else where
        return None

    def _restore(self, key: str, where: str, early: Running | None = None) -> bool:
        fetch: Callable[[str, int], bytes | None]
        try:
            if where in ("local", "prebuilt"):
                store = self.store if where == "local" else self.prebuilt
                assert store is not None
                result = store.get_action(key)
                fetch = store.get_blob
            else:
                assert self.remote is not None
                result = self.remote.get_action(key)
                fetch = self._remote_blob
            if result is None or result.exit_code != 0:
                return False
            files = tuple(f for f in result.outputs if f.path not in CONSOLE)
            if sorted(f.path for f in files) != sorted(map(str, self._names())):
                return False
            printed = {
                f.path: fetch(f.digest, f.size) for f in result.outputs if f.path in CONSOLE
            }
            if None in printed.values() or not restore(
                ActionResult(files), fetch, self.spec.restat,
                before_writing=early.stop if early is not None else None,
            ):
                self.heal = self.heal or where == "remote"
                return False
            echo(printed.get(CONSOLE[0]) or b"", printed.get(CONSOLE[1]) or b"")
            if where == "remote":  # keep what the remote gave: the next build finds it here
                self.added += self.store.put_action(key, result)
        except OSError:
            return False
        return True

    def _remote_blob(self, digest: str, size: int) -> bytes | None:
        assert self.remote is not None
        data = self.remote.get_blob(digest, size)
        if data is not None:
            with contextlib.suppress(OSError):
                self.added += self.store.put_blob(digest, data)
        return data

    def _write_depfile(self, names: Sequence[str]) -> None:
        if self.spec.depfile:
            deps = [self.frame.local(n) for n in names]
            text = depfile_text(self.spec.outputs[0], deps)
            from buildgen.fsutil import write_atomic

            write_atomic(self.spec.depfile, text)  # on a full disk: whole or absent

    # -- misses ----------------------------------------------------------------------------

    def _saved(self, base: str, console: tuple[bytes, bytes]) -> _Saved | None:
        """What to store, read now: the key and each output's bytes and digest. Taken
        before any reply, so that nothing run after it (a rebuild rewriting an output)
        can change what is stored under this action's key."""
        names: tuple[str, ...] = ()
        try:
            if self.spec.depfile:
                prerequisites = parse_depfile(read_file(self.spec.depfile)[0].decode())
                names = hidden_inputs(self.spec, self.frame, prerequisites)
            hidden = hidden_digests(self.frame, names)
            if hidden is None:
                return None  # a prerequisite vanished already: nothing trustworthy to store
            self.hidden = hidden
            return _Saved(base, tuple(hidden), (*self._collect(), *_console_outputs(console)))
        except (OSError, UnicodeDecodeError) as exc:
            print(f"buildgen cache: not stored ({exc})", file=sys.stderr)
            return None

    def _store(self, saved: _Saved, depsets: DepSets) -> None:
        try:
            for output, data in saved.outputs:
                self.added += self.store.put_blob(output.digest, data)
            result = ActionResult(tuple(output for output, _ in saved.outputs))
            # The entry after its blobs: a reader never finds an entry whose blobs are
            # yet to come (only ones evicted since, which it treats as a miss).
            key = saved.key()
            self.added += self.store.put_action(key, result)
            self.added += depsets.record(tuple(name for name, _ in saved.hidden))
            if self.remote is not None:
                # Console blobs are no files under the build dir: sent here, so the
                # client's upload finds them present and reads only real outputs.
                for output, data in saved.outputs:
                    if output.path in CONSOLE:
                        self.remote.put_blob(output.digest, data)
                self.remote.upload_action(key, result, self.build, force=self.heal)
        except OSError as exc:
            print(f"buildgen cache: not stored ({exc})", file=sys.stderr)

    def _names(self) -> list[str]:
        return [name for name in map(output_name, self.spec.outputs) if name is not None]

    def _collect(self) -> list[tuple[OutputFile, bytes]]:
        outputs = []
        for path, name in zip(self.spec.outputs, self._names(), strict=True):
            data, info = read_file(path)
            executable = bool(info.st_mode & 0o100)
            digest = hashlib.sha256(data).hexdigest()
            outputs.append((OutputFile(name, digest, len(data), executable), data))
        return outputs

    def _explain(self, parts: KeyParts, base: str, outcome: str) -> None:
        """Why this action hit or missed: diff two builds' files to see what differs."""
        import json

        from buildgen.cache.keys import key_document
        from buildgen.fsutil import write_atomic

        hidden = self.hidden or ()
        key = full_key(base, hidden) if self.hidden is not None else None
        document = {
            "outcome": outcome, "key": key, "base_key": base,
            "base": key_document(parts), "hidden": [list(h) for h in hidden],
        }  # fmt: skip
        path = self.build / EXPLAIN_DIR / f"{self.spec.outputs[0]}.json"
        with contextlib.suppress(OSError):
            write_atomic(path, json.dumps(document, indent=1, sort_keys=True) + "\n")

    def _account(self, outcome: str) -> None:
        # The store's counters know hits and misses: an action run anywhere is a miss.
        counted = outcome if outcome in stats.OUTCOMES else "ran"
        try:
            size = stats.record(self.settings.dir, counted, self.added)
            if size > self.settings.max_size:
                from buildgen.cache.evict import evict

                evict(self.settings.dir, self.settings.max_size)
        except OSError as exc:
            print(f"buildgen cache: statistics not updated ({exc})", file=sys.stderr)


@dataclass(frozen=True)
class _Saved:
    base: str
    hidden: tuple[tuple[str, str], ...]  # (name, digest) of the hidden inputs (headers)
    outputs: tuple[tuple[OutputFile, bytes], ...]  # read and hashed after the command ran

    def key(self) -> str:
        """Computed from what was read before the reply, but only after it."""
        return full_key(self.base, self.hidden)


def _console_outputs(console: tuple[bytes, bytes]) -> list[tuple[OutputFile, bytes]]:
    return [
        (OutputFile(name, hashlib.sha256(data).hexdigest(), len(data)), data)
        for name, data in zip(CONSOLE, console, strict=True)
        if data
    ]


def _open_remote(settings: CacheSettings, build: Path) -> RemoteStore | None:
    """The HTTP cache when one is configured, else the executor's action cache."""
    if settings.remote:
        from buildgen.cache.remote import RemoteCache

        return RemoteCache.from_settings(
            settings.remote, settings.read_only, build / REMOTE_STATE, settings.remote_timeout
        )
    if settings.executor is not None:
        from buildgen.remote.action_cache import ReapiActionCache

        return ReapiActionCache(settings.executor, build / REMOTE_STATE, settings.read_only)
    return None
