"""Partitions through the real build: policies, pins, a partition file and a step, each
built into a library whose outputs match onnxruntime, with every region's `target`
respected by codegen."""

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from buildgen.cli import main

pytestmark = pytest.mark.slow


def _model(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b1"),
        numpy_helper.from_array(rng.standard_normal((32, 8)).astype(np.float32), "w2"),
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="/l1/MatMul"),
        helper.make_node("Add", ["h1", "b1"], ["a1"], name="/l1/Add"),
        helper.make_node("Relu", ["a1"], ["r1"], name="/l1/Relu"),
        helper.make_node("MatMul", ["r1", "w2"], ["h2"], name="/l2/MatMul"),
        helper.make_node("Add", ["h2", "b2"], ["a2"], name="/l2/Add"),
        helper.make_node("Softmax", ["a2"], ["s"], name="/head/Softmax", axis=-1),
        helper.make_node("Exp", ["s"], ["e"], name="/head/Exp"),
        helper.make_node("Mul", ["e", "s"], ["y"], name="/head/Mul"),
    ]
    graph = helper.make_graph(
        nodes, "blocks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, path)
    return path


def _build(tmp_path: Path, partition: str = "{}", pins: str = "{}") -> Path:
    _model(tmp_path / "blocks.onnx")
    (tmp_path / "BUILD.yaml").write_text(textwrap.dedent(f"""\
        buildgen: 1
        targets:
          fast: {{kind: composite, host: {{kind: c, opt_level: 2}}, accelerators: [tgemm, tvec]}}
        models:
          blocks:
            source: blocks.onnx
            inputs: {{x: [4, 16]}}
            targets: [fast]
            pin: {pins}
            partition: {partition}
        """))
    assert main(["build", "--manifest", str(tmp_path / "BUILD.yaml")]) == 0
    return tmp_path / "build" / "blocks" / "fast"


def _check_numerics(out: Path, tmp_path: Path) -> None:
    import onnxruntime as ort

    import buildgen.runtime

    x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    (y,) = buildgen.runtime.load(out / "libblocks.so")(x)
    session = ort.InferenceSession(str(tmp_path / "blocks.onnx"),
                                   providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(y, session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)


def _regions(out: Path) -> list[tuple[str, list[str]]]:
    doc = json.loads((out / "partition.json").read_text())
    return [(r["target"], r["nodes"]) for r in doc["regions"]]


def _check_modules(out: Path) -> None:
    """Every region's code is in its target's module, and only there."""
    doc = json.loads((out / "partition.json").read_text())
    for region in doc["regions"]:
        for kind in ("c", "tgemm", "tvec"):
            text = (out / "src" / f"{kind}.c").read_text()
            # the c host names its exports through BG_EXPORT (one object per ISA level)
            defined = f"int BG_EXPORT(blocks__{kind}_{region['id']})(" in text
            assert defined == (kind == region["target"]), (kind, region)


def test_priority_policy_builds_across_accelerators(plugin, tmp_path):
    out = _build(tmp_path)
    assert _regions(out) == [
        ("tgemm", ["/l1/MatMul", "/l1/Add", "/l1/Relu", "/l2/MatMul", "/l2/Add"]),
        ("tvec", ["/head/Softmax"]),
        ("c", ["/head/Exp"]),
        ("tvec", ["/head/Mul"]),
    ]
    _check_modules(out)
    _check_numerics(out, tmp_path)


def test_pins_reach_the_generated_modules(plugin, tmp_path):
    out = _build(tmp_path, pins='{"/l1/*": host, "op:Softmax": host}')
    assert _regions(out)[0] == ("c", ["/l1/MatMul", "/l1/Add", "/l1/Relu"])
    assert ("c", ["/head/Softmax", "/head/Exp"]) in _regions(out)
    _check_modules(out)
    _check_numerics(out, tmp_path)


def test_cost_policy_builds_with_the_analytic_estimate(plugin, tmp_path):
    out = _build(tmp_path, partition="{policy: cost}")
    doc = json.loads((out / "partition.json").read_text())
    assert all("analytic estimate" in r["reason"] for r in doc["regions"])
    _check_modules(out)
    _check_numerics(out, tmp_path)


def test_a_partition_file_sets_targets_and_the_policy_fills_the_rest(plugin, tmp_path):
    (tmp_path / "mine.json").write_text(json.dumps({
        "format": "buildgen-partition", "version": 1,
        "regions": [
            {"target": "tvec", "nodes": ["/l1/Add", "/l1/Relu"]},
            {"target": "host", "nodes": ["/head/Softmax"]},
            {"nodes": ["/head/Exp"]},  # no target: the policy decides
        ],
    }))
    out = _build(tmp_path, partition="{file: mine.json}")
    regions = _regions(out)
    assert ("tvec", ["/l1/Add", "/l1/Relu"]) in regions
    assert ("c", ["/head/Softmax"]) in regions
    assert ("tgemm", ["/l1/MatMul"]) in regions  # its chain lost Add and Relu to the file
    doc = json.loads((out / "partition.json").read_text())
    assert any(r["reason"] == "set by partition file mine.json" for r in doc["regions"])
    _check_modules(out)
    _check_numerics(out, tmp_path)


STEP = '''
from buildgen.partition import Partition, Region


def host_head(graph, target, partition):
    """Moves every /head/ node to the host; leaves the rest as the policy made it."""
    regions = []
    for r in partition.regions:
        head = tuple(n for n in r.nodes if n.startswith("/head/"))
        rest = tuple(n for n in r.nodes if n not in head)
        if rest:
            regions.append(Region(r.id, r.target, rest, r.reason, r.pattern))
        if head:
            regions.append(Region(r.id + "h", "c", head, "the head stays on the host"))
    return Partition(partition.model, partition.target, partition.graph_digest, tuple(regions))
'''


def test_a_python_step_rewrites_the_partition(plugin, tmp_path):
    (tmp_path / "mysteps.py").write_text(STEP)
    out = _build(tmp_path, partition='{step: "mysteps:host_head"}')
    regions = _regions(out)
    assert all(t == "c" for t, nodes in regions if any(n.startswith("/head/") for n in nodes))
    doc = json.loads((out / "partition.json").read_text())
    assert any("set by step mysteps:host_head" in r["reason"] for r in doc["regions"])
    assert [r["id"] for r in doc["regions"]] == [f"r{i}" for i in range(len(doc["regions"]))]
    _check_modules(out)
    _check_numerics(out, tmp_path)
    # The step's module is an input of the partition: editing it re-partitions.
    (tmp_path / "mysteps.py").write_text(STEP.replace('"c", head', 'r.target, head'))
    assert main(["build", "--manifest", str(tmp_path / "BUILD.yaml")]) == 0
    assert ("tvec", ["/head/Softmax"]) in _regions(out)
