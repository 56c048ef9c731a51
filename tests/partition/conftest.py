"""Fixtures of the partition tests: the test accelerators as a plug-in, targets, graphs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from partition_plugin import write_plugin

from buildgen.backends.registry import get_backend
from buildgen.partition.matcher import load_predicate
from buildgen.targets import reload_registry

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path (and on the actions' PYTHONPATH) for plug-in packages."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", f"{site}:{REPO}")
    yield site
    monkeypatch.undo()
    for module in [m for m in sys.modules if m.split(".")[0] == "bgpart"]:
        del sys.modules[module]
    reload_registry()
    get_backend.cache_clear()
    load_predicate.cache_clear()


@pytest.fixture
def plugin(site):
    """Registers the test kinds tgemm, tvec and tall; returns a function re-registering
    them with other pattern tables (kind -> rules text after the toolchain)."""

    def install(tables: dict[str, str] | None = None) -> Path:
        package = write_plugin(site, tables)
        for module in [m for m in sys.modules if m.split(".")[0] == "bgpart"]:
            del sys.modules[module]
        reload_registry()
        get_backend.cache_clear()
        load_predicate.cache_clear()
        return package

    install()
    return install

