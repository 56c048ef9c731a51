"""Helpers for the manifest tests: write a BUILD.yaml (and the model files it names)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from buildgen.errors import BuildgenError
from buildgen.manifest import IsKnownTarget, load_manifest

WriteManifest = Callable[..., Path]


@pytest.fixture
def write_manifest(tmp_path: Path) -> WriteManifest:
    """Write ``text`` (dedented) as tmp_path/BUILD.yaml, creating the listed model files.

    Model files are only checked for existence here, so empty files stand in for models.
    """

    def write(text: str, sources: tuple[str, ...] = ("mlp.onnx",)) -> Path:
        for source in sources:
            (tmp_path / source).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / source).write_bytes(b"")
        path = tmp_path / "BUILD.yaml"
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return write


ErrorsOf = Callable[..., list[str]]


@pytest.fixture
def errors_of() -> ErrorsOf:
    """``line:col: message`` of every diagnostic load_manifest raises for a manifest.

    A fixture rather than an importable function: test folders have no __init__.py, so
    helper modules could clash by name with other areas' helpers.
    """

    def collect(path: Path, is_known_target: IsKnownTarget | None = None) -> list[str]:
        with pytest.raises(BuildgenError) as caught:
            load_manifest(path, is_known_target)
        return [
            f"{d.location.line}:{d.location.column}: {d.message}" if d.location else d.message
            for d in caught.value.diagnostics
        ]

    return collect
