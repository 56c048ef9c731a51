"""Find a backend's implementation by its kind.

Built-in kinds name their class in rules/<kind>.yaml (`backend: module:Class`); external
packages register kinds under the `buildgen.backends` entry-point group. Nothing registers
itself as a side effect of being imported.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points

from buildgen.backends.base import Backend
from buildgen.errors import error
from buildgen.targets.registry import get_kind


def _load(reference: str) -> type:
    module_name, _, attr = reference.partition(":")
    return getattr(importlib.import_module(module_name), attr)


@cache
def get_backend(kind: str) -> Backend:
    reference = get_kind(kind).backend
    plugins = {ep.name: ep for ep in entry_points(group="buildgen.backends")}
    if reference is None:
        # The kind is declared (it resolves) but nothing generates its code yet.
        if kind not in plugins:
            raise error(f"kind {kind!r} has no code generator in this buildgen yet")
        cls = plugins[kind].load()
    else:
        try:
            cls = _load(reference)
        except (ImportError, AttributeError) as exc:
            if kind not in plugins:
                raise error(f"backend {kind!r}: cannot load {reference!r}: {exc}") from exc
            cls = plugins[kind].load()
    backend: Backend = cls()
    return backend
