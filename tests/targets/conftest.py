import textwrap
from pathlib import Path

import pytest

from buildgen.errors import BuildgenError
from buildgen.manifest import load_manifest
from buildgen.targets import is_known_target


@pytest.fixture
def manifest_file(tmp_path):
    """Write a manifest (dedented) next to an empty model file; returns its path."""
    (tmp_path / "m.onnx").write_bytes(b"")

    def write(text: str, name: str = "BUILD.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path

    return write


@pytest.fixture
def manifest(manifest_file):
    """A loaded Manifest from manifest text."""

    def load(text: str):
        return load_manifest(manifest_file(text), is_known_target)

    return load


def located(call) -> list[str]:
    """Each diagnostic of the BuildgenError `call()` raises, as 'line:col: message'."""
    with pytest.raises(BuildgenError) as info:
        call()
    out = []
    for d in info.value.diagnostics:
        where = f"{d.location.line}:{d.location.column}: " if d.location else ""
        out.append(where + d.message)
    return out


@pytest.fixture
def errors():
    return located


@pytest.fixture
def without_backend(monkeypatch):
    """`without_backend(kind, ...)`: those kinds declared as before but with no code generator
    (no `backend:` in their rules, as a plug-in may declare a kind), for this test only. Every
    built-in kind has one, so this is how the checks on kinds that cannot be built are tested.
    """
    from dataclasses import replace

    from buildgen.targets import registry as kinds_registry

    real = kinds_registry.registry()

    def strip(*names: str, backend: str | None = None) -> None:
        kinds = {name: replace(kind, backend=backend) if name in names else kind
                 for name, kind in real.kinds.items()}
        monkeypatch.setattr(kinds_registry, "registry", lambda: replace(real, kinds=kinds))

    return strip
