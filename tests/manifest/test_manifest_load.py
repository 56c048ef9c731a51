"""The YAML loader: plain data, positions of values and keys, and its own errors."""

from __future__ import annotations

import pickle
import textwrap
from pathlib import Path

import pytest

from buildgen.errors import BuildgenError, SourceLocation
from buildgen.manifest import load_yaml, parse_yaml

TEXT = textwrap.dedent(
    """\
    buildgen: 1
    models:
      mlp:
        source: m.onnx
        inputs: {x: [8, 512]}
        targets:
          - cpu
          - gpu
    """
)


def at(line: int, column: int) -> SourceLocation:
    return SourceLocation("B.yaml", line, column)


def test_plain_data() -> None:
    doc = parse_yaml(TEXT, "B.yaml")
    assert doc.data == {
        "buildgen": 1,
        "models": {"mlp": {"source": "m.onnx", "inputs": {"x": [8, 512]},
                           "targets": ["cpu", "gpu"]}},
    }
    assert doc.diagnostics == ()


def test_value_positions() -> None:
    values = parse_yaml(TEXT, "B.yaml").source_map.values
    assert values[("buildgen",)] == at(1, 11)
    assert values[("models", "mlp", "source")] == at(4, 13)
    assert values[("models", "mlp", "inputs", "x")] == at(5, 17)
    assert values[("models", "mlp", "inputs", "x", 1)] == at(5, 21)
    assert values[("models", "mlp", "targets", 1)] == at(8, 9)


def test_key_positions() -> None:
    keys = parse_yaml(TEXT, "B.yaml").source_map.keys
    assert keys[("models",)] == at(2, 1)
    assert keys[("models", "mlp")] == at(3, 3)
    assert keys[("models", "mlp", "inputs", "x")] == at(5, 14)


def test_locate_falls_back_to_nearest_ancestor() -> None:
    source_map = parse_yaml(TEXT, "B.yaml").source_map
    assert source_map.locate(("models", "mlp", "source", "nothing", 3)) == at(4, 13)
    assert source_map.locate_key(("models", "mlp", "source")) == at(4, 5)


def test_source_lines_are_kept_for_carets() -> None:
    doc = parse_yaml(TEXT, "B.yaml")
    diagnostic = doc.source_map.diagnostic(("models", "mlp", "inputs", "x"), "bad shape")
    assert diagnostic.render() == (
        "B.yaml:5:17: error: models.mlp.inputs.x: bad shape\n"
        "      inputs: {x: [8, 512]}\n"
        "                  ^"
    )


def test_keys_are_their_text_and_dates_stay_strings() -> None:
    doc = parse_yaml("8: a\ntrue: b\nwhen: 2024-01-02\nn: ~\nf: 1.5\n", "B.yaml")
    assert doc.data == {"8": "a", "true": "b", "when": "2024-01-02", "n": None, "f": 1.5}


def test_duplicate_key_is_reported_at_second_occurrence() -> None:
    doc = parse_yaml("models:\n  mlp: {source: a}\n  mlp: {source: b}\n", "B.yaml")
    assert doc.data == {"models": {"mlp": {"source": "a"}}}  # the first one is kept
    [diagnostic] = doc.diagnostics
    assert diagnostic.message == "models: duplicate key 'mlp'"
    assert diagnostic.location == at(3, 3)
    assert diagnostic.hint == "'mlp' is first defined at B.yaml:2:3"


def test_merge_keys_fill_only_missing_keys_without_duplicate_errors() -> None:
    doc = parse_yaml("a: &base {kind: c, opt: 1}\nb: {<<: *base, opt: 3}\n", "B.yaml")
    assert doc.data == {"a": {"kind": "c", "opt": 1}, "b": {"opt": 3, "kind": "c"}}
    assert doc.diagnostics == ()
    # A merged value is located where it is written: in the anchored mapping.
    assert doc.source_map.values[("b", "kind")] == at(1, 17)


def test_recursive_alias_is_an_error_not_a_hang() -> None:
    doc = parse_yaml("a: &x [1, *x]\n", "B.yaml")
    assert [d.message for d in doc.diagnostics] == ["a[1]: an alias refers to itself"]


def test_unsupported_tags_and_collection_keys() -> None:
    doc = parse_yaml("a: !include other.yaml\n? [1, 2]\n: 3\nb: !!binary aGk=\n", "B.yaml")
    assert [(d.location, d.message) for d in doc.diagnostics] == [
        (at(1, 4), "a: unsupported YAML tag '!include'"),
        (at(2, 3), "a mapping key must be a plain name, not a collection"),
        (at(4, 4), "b: unsupported YAML tag 'tag:yaml.org,2002:binary'"),
    ]


def test_syntax_error_is_located() -> None:
    with pytest.raises(BuildgenError) as caught:
        parse_yaml("models:\n  mlp: [1, 2\n  other: 3\n", "B.yaml")
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.location == at(3, 8)
    assert diagnostic.message.startswith("invalid YAML: ")
    assert diagnostic.hint == "while parsing a flow sequence that starts at B.yaml:2:8"
    assert diagnostic.source_line == "  other: 3"


def test_tab_indentation_gets_a_hint() -> None:
    with pytest.raises(BuildgenError) as caught:
        parse_yaml("models:\n\tmlp: 1\n", "B.yaml")
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.location == at(2, 1)
    assert diagnostic.hint == "indent with spaces: YAML does not allow tabs there"


def test_unprintable_character_is_located() -> None:
    with pytest.raises(BuildgenError) as caught:
        parse_yaml("a: 1\nb: x\x07y\n", "B.yaml")
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.location == at(2, 5)
    assert diagnostic.message == "invalid YAML: character #x0007 is not allowed"


def test_several_documents_are_an_error() -> None:
    with pytest.raises(BuildgenError) as caught:
        parse_yaml("a: 1\n---\nb: 2\n", "B.yaml")
    assert caught.value.diagnostics[0].location == at(2, 1)


def test_empty_document() -> None:
    doc = parse_yaml("# nothing here\n", "B.yaml")
    assert doc.data is None and doc.diagnostics == ()


def test_load_yaml_reads_files_and_keeps_the_name_given(tmp_path: Path) -> None:
    path = tmp_path / "BUILD.yaml"
    path.write_bytes("\ufeffa: [1]\n".encode())  # a byte-order mark shifts no column
    doc = load_yaml(path)
    assert doc.data == {"a": [1]}
    assert doc.source_map.values[("a",)] == SourceLocation(str(path), 1, 4)
    assert pickle.loads(pickle.dumps(doc)) == doc


def test_load_yaml_file_errors(tmp_path: Path) -> None:
    with pytest.raises(BuildgenError, match="manifest not found: .*missing.yaml"):
        load_yaml(tmp_path / "missing.yaml")
    (tmp_path / "latin1.yaml").write_bytes(b"a: \xe9\n")
    with pytest.raises(BuildgenError, match="not UTF-8 text"):
        load_yaml(tmp_path / "latin1.yaml")
