"""load_manifest end to end: the dataclasses it returns, and every mistake reported at once."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
from jsonschema import Draft202012Validator

from buildgen.errors import BuildgenError, SourceLocation
from buildgen.manifest import FrozenDict, PartitionOptions, load_manifest, thaw
from buildgen.manifest.model import RemoteOptions

DESIGN_EXAMPLE = """
buildgen: 1
targets:
  cpu:                                  # a composite target
    kind: composite
    host: {kind: c, opt_level: 3}
    accelerators:                       # priority order
      - {kind: onednn}
      - {kind: openblas}
  gpu:
    kind: composite
    host: {kind: c}
    device: {kind: cuda, arch: sm_90}
    accelerators:
      - {kind: cutlass, sm: 90, split_k_slices: [1, 2, 4]}
      - {kind: cudnn}
      - {kind: cublas}
  fast-cpu: {tag: x86-onednn}           # an alias expands to a registered composite
models:
  mlp:
    source: examples/models/mlp.onnx
    inputs: {x: [8, 512]}               # fixes dynamic dims
    targets: [cpu, gpu]
    pin: {"/layer3/MatMul": cublas}     # a user's choice is never overwritten
"""


def test_design_example(write_manifest, tmp_path) -> None:
    path = write_manifest(DESIGN_EXAMPLE, sources=("examples/models/mlp.onnx",))
    manifest = load_manifest(path)
    assert manifest.path == path and manifest.root == tmp_path
    assert manifest.build_dir == tmp_path / "build"
    [mlp] = manifest.models
    assert mlp.name == "mlp"
    assert mlp.source == tmp_path / "examples" / "models" / "mlp.onnx"
    assert mlp.inputs == (("x", (8, 512)),)
    assert mlp.input_shape("x") == (8, 512) and mlp.input_shape("y") is None
    assert mlp.targets == ("cpu", "gpu")
    assert mlp.pins == (("/layer3/MatMul", "cublas"),)
    assert mlp.partition == PartitionOptions()
    assert mlp.location == SourceLocation(str(path), 19, 3)
    assert [t.name for t in manifest.targets] == ["cpu", "fast-cpu", "gpu"]
    gpu = manifest.target("gpu")
    assert gpu.data["device"] == {"kind": "cuda", "arch": "sm_90"}
    assert gpu.location == SourceLocation(str(path), 9, 3)
    assert manifest.target("fast-cpu").data == {"tag": "x86-onednn"}
    assert manifest.locate(("targets", "gpu", "device", "arch")) == SourceLocation(
        str(path), 12, 32
    )
    with pytest.raises(KeyError):
        manifest.model("nope")


def test_target_data_is_read_only_but_works_as_json(write_manifest) -> None:
    path = write_manifest(DESIGN_EXAMPLE, sources=("examples/models/mlp.onnx",))
    data = load_manifest(path).target("gpu").data
    assert isinstance(data, FrozenDict) and isinstance(data, dict)
    with pytest.raises(TypeError):
        data["kind"] = "c"
    with pytest.raises(TypeError):
        data["accelerators"].append({"kind": "x"})
    with pytest.raises(TypeError):
        data["accelerators"][0].update(sm=80)
    # Later stages validate it with jsonschema and serialize it with json.
    schema = {"type": "object", "properties": {"accelerators": {"type": "array"}}}
    assert Draft202012Validator(schema).is_valid(data)
    assert json.loads(json.dumps(data)) == data
    plain = thaw(data)
    plain["accelerators"].append({"kind": "x"})
    assert len(data["accelerators"]) == 3


def test_manifest_is_hashable_copyable_picklable(write_manifest) -> None:
    manifest = load_manifest(write_manifest(DESIGN_EXAMPLE, ("examples/models/mlp.onnx",)))
    assert copy.deepcopy(manifest) == manifest
    restored = pickle.loads(pickle.dumps(manifest))
    assert restored == manifest and hash(restored) == hash(manifest)
    assert restored.locate(("models", "mlp")) == manifest.locate(("models", "mlp"))


def test_mapping_order_does_not_matter(write_manifest) -> None:
    first = load_manifest(write_manifest(
        "buildgen: 1\nmodels:\n"
        "  b: {source: mlp.onnx, targets: [t2, t1], inputs: {y: [1], x: [2.0]}}\n"
        "  a: {source: mlp.onnx, targets: [t1], pin: {n2: t1, n1: t2}}\n"
        "targets: {t2: c, t1: c}\n"
    ), lambda name: True)
    second = load_manifest(write_manifest(
        "targets: {t1: c, t2: c}\nbuildgen: 1\nmodels:\n"
        "  a: {pin: {n1: t2, n2: t1}, targets: [t1], source: mlp.onnx}\n"
        "  b: {inputs: {x: [2], y: [1]}, source: mlp.onnx, targets: [t2, t1]}\n"
    ), lambda name: True)
    assert [m.name for m in first.models] == ["a", "b"]
    assert first.model("b").inputs == (("x", (2,)), ("y", (1,)))
    assert isinstance(first.model("b").inputs[0][1][0], int)
    assert first.model("b").targets == ("t2", "t1")  # a list keeps its order
    # Only the recorded positions differ, and they are not part of equality.
    assert [(m.name, m.inputs, m.targets, m.pins) for m in first.models] == [
        (m.name, m.inputs, m.targets, m.pins) for m in second.models
    ]
    assert first.targets[0].data == second.targets[0].data


def test_partition_options_merge_over_defaults(write_manifest, tmp_path) -> None:
    path = write_manifest(
        """
        buildgen: 1
        partition: {policy: cost, records: tuning/records.json}
        targets: {cpu: c}
        models:
          a: {source: mlp.onnx, targets: [cpu]}
          b: {source: mlp.onnx, targets: [cpu], partition: {policy: priority, file: b.part}}
        """
    )
    (tmp_path / "b.part").write_text("{}")  # a partition file must exist; records need not
    manifest = load_manifest(path)
    records = tmp_path / "tuning" / "records.json"
    assert manifest.partition == PartitionOptions("cost", records, None)
    assert manifest.model("a").partition == PartitionOptions("cost", records, None)
    assert manifest.model("b").partition == PartitionOptions(
        "priority", records, tmp_path / "b.part"
    )


def test_manifest_diagnostic_for_later_stages(write_manifest) -> None:
    path = write_manifest(DESIGN_EXAMPLE, sources=("examples/models/mlp.onnx",))
    manifest = load_manifest(path)
    diagnostic = manifest.diagnostic(
        ("targets", "gpu", "device", "arch"), "unknown arch 'sm_91'", "did you mean 'sm_90'?"
    )
    assert diagnostic.render() == (
        f"{path}:12:32: error: targets.gpu.device.arch: unknown arch 'sm_91'\n"
        "      device: {kind: cuda, arch: sm_90}\n"
        "                                 ^\n"
        "  hint: did you mean 'sm_90'?"
    )
    assert manifest.diagnostic(("targets", "gpu"), "x", at_key=True).location == (
        SourceLocation(str(path), 9, 3)
    )


TEN_MISTAKES = """
buildgen: 1
bild_dir: out
targets:
  cpu: {kind: c}
  "my gpu": {kind: cuda}
models:
  mlp:
    sorce: mlp.onnx
    inputs: {x: eight}
    targets: [cpu, cpux]
  int:
    source: missing.onnx
    inputs: {x: [8, 0]}
    targets: [cpu]
    partition: {policy: fastest}
  mlp:
    source: mlp.onnx
    targets: [cpu]
"""


def test_ten_mistakes_give_ten_located_errors(write_manifest, tmp_path) -> None:
    path = write_manifest(TEN_MISTAKES)
    with pytest.raises(BuildgenError) as caught:
        load_manifest(path)
    found = [(d.location.line, d.location.column, d.message, d.hint)
             for d in caught.value.diagnostics if d.location]
    assert found == [
        (2, 1, "unknown top-level key 'bild_dir'", "did you mean 'build_dir'?"),
        (5, 3, "targets: invalid target name 'my gpu'",
         "target names start with a letter and hold only letters, digits, '_' and '-'"),
        (8, 5, "models.mlp: unknown key 'sorce'", "did you mean 'source'?"),
        (9, 17, "models.mlp.inputs.x: expected a list of positive integers, got 'eight'", None),
        (10, 20, "models.mlp.targets[1]: unknown target 'cpux'", "did you mean 'cpu'?"),
        (11, 3, "models: model name 'int' is a C keyword",
         "the model name prefixes its C API (int_create, int_run, ...)"),
        (12, 13, f"models.int.source: file not found: {tmp_path / 'missing.onnx'}",
         "relative paths start at the manifest's folder"),
        (13, 21, "models.int.inputs.x[1]: expected a positive integer, got 0", None),
        (15, 25, "models.int.partition.policy: expected 'priority' or 'cost', got 'fastest'",
         None),
        (16, 3, "models: duplicate key 'mlp'", "'mlp' is first defined at " + f"{path}:7:3"),
    ]
    assert len(found) == 10
    assert len(caught.value.diagnostics) == len(found)  # every diagnostic is located
    # One rendering lists them all, each with its source line and caret.
    assert str(caught.value).count(": error: ") == len(found)
    assert str(caught.value).count("^") == len(found)


def test_the_remote_section(write_manifest, tmp_path) -> None:
    path = write_manifest(
        """
        buildgen: 1
        remote:
          executor: grpcs://re.example.com:443
          instance: main
          platform: {OSFamily: linux, cores: 8}
          jobs: 64
          token_file: secrets/token
          tls: {ca: ca.pem}
        targets: {cpu: c}
        models:
          a: {source: mlp.onnx, targets: [cpu]}
        """
    )
    remote = load_manifest(path).remote
    assert remote == RemoteOptions(
        executor="grpcs://re.example.com:443", instance="main",
        platform=(("OSFamily", "linux"), ("cores", "8")), jobs=64,
        token_file=tmp_path / "secrets" / "token", tls=(("ca", tmp_path / "ca.pem"),))
