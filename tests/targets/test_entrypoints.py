"""Plug-ins' entry points are remembered between runs, and found again when one is installed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from buildgen.targets import entrypoints


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder on sys.path, last modified a minute ago; a private cache folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "site"
    folder.mkdir()
    _age(folder)
    monkeypatch.syspath_prepend(str(folder))
    entrypoints.forget()
    yield folder
    monkeypatch.undo()
    entrypoints.forget()


def _age(folder: Path) -> None:
    then = os.stat(folder).st_mtime - 60
    os.utime(folder, (then, then))


def _install(site: Path, name: str) -> None:
    dist = site / f"{name}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[buildgen.kinds]\n{name} = {name}\n")


def _no_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    def scan() -> None:
        raise AssertionError("scanned the installed distributions")

    monkeypatch.setattr(entrypoints, "_scan", scan)


def _quiet_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """sys.path's other folders may have changed just now (a fresh checkout): only the
    test's own folder is judged by its age here."""
    monkeypatch.setattr(entrypoints, "_RACY_SECONDS", 0.0)


def test_the_answer_is_kept_and_read_back_without_a_scan(site, monkeypatch) -> None:
    _quiet_path(monkeypatch)
    _install(site, "bgkept")
    _age(site)
    assert [ep.name for ep in entrypoints.entry_points("buildgen.kinds")] == ["bgkept"]
    entrypoints.forget()
    _no_scan(monkeypatch)
    (found,) = entrypoints.entry_points("buildgen.kinds")
    assert (found.name, found.value, found.group) == ("bgkept", "bgkept", "buildgen.kinds")


def test_installing_a_plugin_is_seen_at_once(site, monkeypatch) -> None:
    _quiet_path(monkeypatch)
    assert entrypoints.entry_points("buildgen.kinds") == []
    _install(site, "bgnew")  # the folder's mtime moves
    entrypoints.forget()
    assert [ep.name for ep in entrypoints.entry_points("buildgen.kinds")] == ["bgnew"]


def test_a_folder_changed_just_now_is_not_trusted_later(site, monkeypatch) -> None:
    _install(site, "bgracy")  # modified now: within the racy window
    assert [ep.name for ep in entrypoints.entry_points("buildgen.kinds")] == ["bgracy"]
    assert not (Path(os.environ["XDG_CACHE_HOME"]) / "buildgen" / "plugins" /
                "entry-points.json").exists()


def test_another_interpreter_does_not_share_the_answer(site, monkeypatch) -> None:
    _quiet_path(monkeypatch)
    entrypoints.entry_points("buildgen.kinds")
    entrypoints.forget()
    monkeypatch.setattr(sys, "executable", sys.executable + "-other")
    _no_scan(monkeypatch)
    with pytest.raises(AssertionError, match="scanned"):
        entrypoints.entry_points("buildgen.kinds")
