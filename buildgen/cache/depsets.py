"""The direct-mode manifest of one base key: the sets of hidden inputs seen with it.

Stored like any action result, so the remote protocol needs nothing new: the entry at
`depsets_key(base)` names one blob holding `{"format": 1, "sets": [[name, ...], ...]}`,
the most recently recorded set first. A fresh clone with an empty local store finds the
sets in the remote cache, hashes the files each names, and looks those keys up.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from buildgen.cache.keys import depsets_key
from buildgen.cache.model import ActionResult, OutputFile
from buildgen.cache.store import LocalStore

if TYPE_CHECKING:
    from buildgen.cache.model import RemoteStore

DEPSETS_FORMAT = 1
DEPSETS_OUTPUT = "depsets.json"
MAX_SETS = 16  # a header set changes rarely; old ones only cost a lookup each

DepSet = tuple[str, ...]


class DepSets:
    def __init__(
        self, base: str, store: LocalStore, remote: RemoteStore | None, uses_depfile: bool,
        prebuilt: LocalStore | None = None,
    ):
        self.key = depsets_key(base)
        self.store = store
        self.remote = remote
        self.prebuilt = prebuilt  # read only (buildgen/cache/prebuilt.py)
        self.uses_depfile = uses_depfile
        self._local: list[DepSet] | None = None
        self._prebuilt: list[DepSet] | None = None
        self._remote: list[DepSet] | None = None

    def candidates(self, where: str) -> list[DepSet]:
        """The sets to try in the local store, the prebuilt one or the remote cache, in
        that order: each only those not tried before it."""
        if not self.uses_depfile:
            return [()]
        if where == "local":
            return self._local_sets()
        tried = set(self._local_sets())
        if where == "prebuilt":
            return [s for s in self._prebuilt_sets() if s not in tried]
        tried.update(self._prebuilt_sets())
        return [s for s in self._remote_sets() if s not in tried]

    def record(self, names: DepSet, push: bool = True) -> int:
        """Remember `names` locally and, with `push`, in a writable remote; returns the
        bytes stored locally."""
        if not self.uses_depfile:
            return 0
        added = 0
        local = self._local_sets()
        if names not in local:
            updated = _add(local, names)
            data, result = _encode(updated)
            added += self.store.put_blob(result.outputs[0].digest, data)
            added += self.store.put_action(self.key, result)
            self._local = updated
        if push and self.remote is not None and not self.remote.read_only:
            remote = self._remote_sets()
            if names not in remote:
                updated = _add(remote, names)
                data, result = _encode(updated)
                self.remote.put_blob(result.outputs[0].digest, data)
                self.remote.put_action(self.key, result)
                self._remote = updated
        return added

    def _local_sets(self) -> list[DepSet]:
        if self._local is None:
            self._local = _sets_in(self.store, self.key)
        return self._local

    def _prebuilt_sets(self) -> list[DepSet]:
        if self._prebuilt is None:
            self._prebuilt = _sets_in(self.prebuilt, self.key)
        return self._prebuilt

    def _remote_sets(self) -> list[DepSet]:
        if self._remote is None:
            self._remote = _sets_in(self.remote, self.key)
        return self._remote


def _sets_in(store: LocalStore | RemoteStore | None, key: str) -> list[DepSet]:
    """The sets recorded under `key` in `store` (none when there is no such store)."""
    if store is None:
        return []
    return _decode(_blob_of(store.get_action(key), store.get_blob))


def _add(sets: list[DepSet], names: DepSet) -> list[DepSet]:
    return [names, *(s for s in sets if s != names)][:MAX_SETS]


def _blob_of(
    entry: ActionResult | None, get_blob: Callable[[str, int], bytes | None]
) -> bytes | None:
    if entry is None or len(entry.outputs) != 1 or entry.outputs[0].path != DEPSETS_OUTPUT:
        return None
    return get_blob(entry.outputs[0].digest, entry.outputs[0].size)


def _encode(sets: list[DepSet]) -> tuple[bytes, ActionResult]:
    data = json.dumps({"format": DEPSETS_FORMAT, "sets": [list(s) for s in sets]}).encode()
    output = OutputFile(DEPSETS_OUTPUT, hashlib.sha256(data).hexdigest(), len(data))
    return data, ActionResult((output,))


def _decode(blob: bytes | None) -> list[DepSet]:
    if blob is None:
        return []
    try:
        document = json.loads(blob)
        if document.get("format") != DEPSETS_FORMAT:
            return []
        return [tuple(str(name) for name in s) for s in document["sets"]]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []
