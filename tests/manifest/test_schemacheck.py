"""The quick schema check (buildgen/schemacheck.py) against jsonschema, the reference.

It may refuse what jsonschema accepts (the document then goes to jsonschema: only time is
lost) but must never accept what jsonschema refuses; and it must accept the documents
buildgen meets every day, or it saves nothing."""

from __future__ import annotations

import copy
import json
import os
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from buildgen import schemacheck
from buildgen.manifest.validate import manifest_schema
from buildgen.resources import schemas_dir

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = [ROOT / "BUILD.yaml", *sorted((ROOT / "examples").glob("**/BUILD.yaml"))]
KIND_SCHEMAS = sorted((schemas_dir() / "targets").glob("[!_]*.schema.json"))

# Values a user might put anywhere: each type, edge numbers, text a pattern must refuse.
_VALUES: list[Any] = [
    None, True, False, 0, 1, -1, 1.0, 1.5, 2**40, "", "x", "a b", "cpu", "x86-64-v3",
    "line\n", "-O2", "$x", "../m.onnx", [], [1], ["cpu"], ["a", "a"], [1, True], {}, {"kind": "c"},
    {"x": [2, 4]}, {"kind": "c", "march": "x86-64-v3"}, [{"kind": "onednn"}], 3, 64, 65, 0.0,
]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    """One cache folder for the module's tests, not the user's."""
    folder = tmp_path_factory.getbasetemp() / "schema-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    schemacheck._loaded.clear()


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*path, index))
    return found


def _mutants(document: Any, seed: int, count: int) -> list[Any]:
    """`document` with one value (or a key's value) replaced, or a key added or removed."""
    rng = random.Random(seed)
    paths = [p for p in _paths(document) if p]
    out = []
    for _ in range(count):
        mutant = copy.deepcopy(document)
        path = rng.choice(paths)
        parent = mutant
        for part in path[:-1]:
            parent = parent[part]
        action = rng.random()
        if action < 0.15 and isinstance(parent, dict):
            del parent[path[-1]]
        elif action < 0.3 and isinstance(parent, dict):
            parent[rng.choice(["extra", "kind", "march", "source", "inputs", "x-y"])] = (
                rng.choice(_VALUES))
        else:
            parent[path[-1]] = copy.deepcopy(rng.choice(_VALUES))
        out.append(mutant)
    return out


def _check_agreement(schema: dict[str, Any], documents: list[Any]) -> tuple[int, int]:
    """Asserts the quick check accepts nothing jsonschema refuses; returns how many each
    accepted."""
    reference = jsonschema.Draft202012Validator(schema)
    quick = reference_count = 0
    for document in documents:
        valid = reference.is_valid(document)
        fast = schemacheck.accepts(schema, document)
        assert valid or not fast, f"accepted what jsonschema refuses: {json.dumps(document)}"
        quick += fast
        reference_count += valid
    return quick, reference_count


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_manifests_and_their_mutants(manifest: Path) -> None:
    document = yaml.safe_load(manifest.read_text())
    assert schemacheck.accepts(manifest_schema(), document)  # the fast path is taken
    quick, valid = _check_agreement(manifest_schema(), _mutants(document, seed=1, count=400))
    assert valid > 0 and quick == valid  # and it refuses nothing jsonschema accepts, here


@pytest.mark.parametrize("schema_file", KIND_SCHEMAS, ids=lambda p: p.name.split(".")[0])
def test_target_attributes_and_their_mutants(schema_file: Path) -> None:
    schema = json.loads(schema_file.read_text())
    defaults = {name: spec["default"] for name, spec in schema["properties"].items()
                if "default" in spec}
    defaults["kind"] = schema["properties"]["kind"]["const"]
    assert schemacheck.accepts(schema, defaults)
    quick, valid = _check_agreement(schema, _mutants(defaults, seed=2, count=300))
    assert valid > 0 and quick == valid


def test_the_code_is_made_once_and_read_back(monkeypatch) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}
    assert schemacheck.accepts(schema, {"n": 2})
    code = schemacheck.code_file(schema)
    assert code is not None and code.parent == _folder()
    assert oct(code.stat().st_mode & 0o777) == "0o600"
    assert oct(code.parent.stat().st_mode & 0o777) == "0o700"
    schemacheck._loaded.clear()
    monkeypatch.setattr(schemacheck, "_generate", _must_not_run)
    assert schemacheck.accepts(schema, {"n": 2}) and not schemacheck.accepts(schema, {"n": 0})


def test_a_damaged_file_is_made_again() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    assert schemacheck.accepts(schema, ["a"])
    code = schemacheck.code_file(schema)
    assert code is not None
    code.write_bytes(b"not bytecode")
    schemacheck._loaded.clear()
    assert schemacheck.accepts(schema, ["a"]) and not schemacheck.accepts(schema, [1])


def test_a_folder_others_may_write_is_not_read(monkeypatch) -> None:
    folder = _folder()
    schema = {"type": "string", "minLength": 3}
    assert schemacheck.accepts(schema, "abc")
    folder.chmod(0o777)
    try:
        schemacheck._loaded.clear()
        monkeypatch.setattr(schemacheck.marshal, "loads", _must_not_run)
        assert schemacheck.accepts(schema, "abcd") and not schemacheck.accepts(schema, "ab")
    finally:
        folder.chmod(0o700)


def test_a_schema_it_cannot_read_goes_to_jsonschema(monkeypatch) -> None:
    monkeypatch.setattr(schemacheck, "_generate", _must_not_run)
    assert not schemacheck.accepts({"type": "null", "title": "new"}, None)


def _folder() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "buildgen" / "schemas"


def _must_not_run(*args: object, **kwargs: object) -> Any:
    raise AssertionError("called")
