"""Schema errors become `path: expected …, got …` diagnostics located at the value or key."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from jsonschema import Draft202012Validator

from buildgen.errors import BuildgenError
from buildgen.manifest import load_manifest
from buildgen.resources import schemas_dir

# Keywords that can fail on their own and so need a phrase for "expected …" messages.
_FAILING_KEYWORDS = {"type", "const", "enum", "minItems", "minLength", "minimum", "oneOf"}


def _nodes(node: object) -> Iterator[dict[str, object]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)


def test_schema_is_valid_and_every_failing_node_has_a_phrase() -> None:
    schema = json.loads((schemas_dir() / "manifest.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    for node in _nodes(schema):
        if _FAILING_KEYWORDS & node.keys():
            assert "x-expected" in node or "x-message" in node, node


def test_wrong_type_names_path_expectation_and_value(write_manifest, errors_of) -> None:
    path = write_manifest(
        """
        buildgen: 1
        targets: {cpu: c}
        models:
          mlp:
            source: mlp.onnx
            inputs:
              x: eight
            targets: [cpu]
        """
    )
    assert errors_of(path) == [
        "7:10: models.mlp.inputs.x: expected a list of positive integers, got 'eight'"
    ]


def test_rendered_diagnostic_has_file_line_caret(write_manifest) -> None:
    path = write_manifest(
        """
        buildgen: 1
        targets: {cpu: c}
        models:
          mlp: {source: mlp.onnx, targets: [cpu], inputs: {x: [8, -1]}}
        """
    )
    try:
        load_manifest(path)
    except BuildgenError as caught:
        assert caught.render() == (
            f"{path}:4:59: error: models.mlp.inputs.x[1]: expected a positive integer, got -1\n"
            "    mlp: {source: mlp.onnx, targets: [cpu], inputs: {x: [8, -1]}}\n"
            "                                                            ^"
        )
    else:
        raise AssertionError("a negative dimension was accepted")


def test_unknown_keys_at_the_key_with_did_you_mean(write_manifest) -> None:
    path = write_manifest(
        """
        buildgen: 1
        bild_dir: out
        targets: {cpu: c}
        models:
          mlp:
            sorce: mlp.onnx
            targets: [cpu]
            colour: blue
        """
    )
    with pytest.raises(BuildgenError) as caught:
        load_manifest(path)
    found = [(str(d.location).rsplit(":", 2)[1:], d.message, d.hint)
             for d in caught.value.diagnostics]
    assert found == [
        (["2", "1"], "unknown top-level key 'bild_dir'", "did you mean 'build_dir'?"),
        (["6", "5"], "models.mlp: unknown key 'sorce'", "did you mean 'source'?"),
        (["8", "5"], "models.mlp: unknown key 'colour'",
         "allowed keys: inputs, partition, pin, source, targets"),
    ]


def test_missing_key_reported_once_when_an_unknown_key_explains_it(
    write_manifest, errors_of
) -> None:
    # 'sorce' is reported as unknown (with "did you mean 'source'?") and that is enough;
    # 'targets' has no look-alike, so it is reported missing, at the model's key.
    path = write_manifest("buildgen: 1\nmodels:\n  mlp: {sorce: mlp.onnx, colour: 1}\n")
    assert errors_of(path) == [
        "3:3: models.mlp: missing required key 'targets'",
        "3:9: models.mlp: unknown key 'sorce'",
        "3:26: models.mlp: unknown key 'colour'",
    ]


def test_missing_version_and_wrong_version(write_manifest, errors_of) -> None:
    assert errors_of(write_manifest("targets: {}\n")) == ["1:1: missing required key 'buildgen'"]
    assert errors_of(write_manifest("buildgen: 2\n")) == [
        "1:11: buildgen: expected 1 (the manifest format version), got 2"
    ]
    assert errors_of(write_manifest("- buildgen\n")) == [
        "1:1: expected a mapping (the manifest), got a list"
    ]
    assert errors_of(write_manifest("# empty\n")) == ["1:1: the manifest is empty"]


def test_target_shapes(write_manifest, errors_of) -> None:
    path = write_manifest(
        """
        buildgen: 1
        targets:
          a: 5
          b: {host: {kind: c}}
          c: {kind: c, tag: x}
          d: {kind: composite, host: {kind: c, opt_level: "x"}, accelerators: [onednn, 3]}
          e: ""
        """
    )
    assert errors_of(path) == [
        "3:6: targets.a: expected a target kind or tag name, or a mapping with 'kind' or 'tag', "
        "got 5",
        "4:3: targets.b: a target needs a 'kind' or a 'tag'",
        "5:3: targets.c: a target has either a 'kind' or a 'tag', not both",
        "6:80: targets.d.accelerators[1]: expected a target kind or tag name, or a mapping with "
        "'kind' or 'tag', got 3",
        "7:6: targets.e: expected a target kind or tag name, got ''",
    ]


def test_model_fields(write_manifest, errors_of) -> None:
    path = write_manifest(
        """
        buildgen: 1
        targets: {cpu: c}
        models:
          a: [mlp.onnx]
          b: {source: 3, targets: []}
          c: {source: mlp.onnx, targets: cpu, pin: {"/x/MatMul": 1}, inputs: [1]}
          d: {source: mlp.onnx, targets: [cpu, 2], partition: {policy: costs, records: 1}}
        partition: {file: ""}
        """
    )
    assert errors_of(path) == [
        "4:6: models.a: expected a mapping with 'source' and 'targets', got a list",
        "5:15: models.b.source: expected a path to an ONNX file, got 3",
        "5:27: models.b.targets: expected a non-empty list of target names, got an empty list",
        "6:34: models.c.targets: expected a non-empty list of target names, got 'cpu'",
        "6:58: models.c.pin[\"/x/MatMul\"]: expected a target name, got 1",
        "6:70: models.c.inputs: expected a mapping of input names to shapes, got a list",
        "7:40: models.d.targets[1]: expected a target name, got 2",
        "7:64: models.d.partition.policy: expected 'priority' or 'cost', got 'costs'",
        "7:80: models.d.partition.records: expected a path to a tuning-records file, got 1",
        "8:19: partition.file: expected a path to a partition file, got ''",
    ]


def test_enum_did_you_mean(write_manifest) -> None:
    path = write_manifest("buildgen: 1\npartition: {policy: priorty}\n")
    with pytest.raises(BuildgenError) as caught:
        load_manifest(path)
    assert caught.value.diagnostics[0].hint == "did you mean 'priority'?"
