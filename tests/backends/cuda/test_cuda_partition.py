"""Which regions the examples' nodes go to on {host: c, device: cuda}, the host <-> device
copies the partition records, and the cost policy charging them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cuda_helpers import MIXED, TARGET, example_models

from buildgen.importer import import_model
from buildgen.ir import DType, Graph, Node, TensorType, Value
from buildgen.partition.model import Partition, Region, Transfer
from buildgen.partition.pipeline import PartitionOptions, make_partition
from buildgen.partition.serialize import dump_partition, load_partition
from buildgen.partition.transfers import plan_transfers
from buildgen.targets import parse_target

MODELS = example_models()


def _graph(model: str) -> Graph:
    source, inputs = MODELS[model]
    return import_model(source, {k: tuple(v) for k, v in inputs.items()}).graph


@pytest.fixture(scope="module")
def target():
    return parse_target(TARGET, "gpu")


@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_example_runs_on_the_device_with_copies_only_at_its_edges(target, model) -> None:
    graph = _graph(model)
    p = make_partition(graph, target, model, "digest")
    assert [(r.target, len(r.nodes)) for r in p.regions] == [("cuda", len(graph.nodes))]
    assert "the device (cuda)" in p.regions[0].reason
    assert p.transfers == (
        *(Transfer(i, "cpu", "cuda", "r0") for i in graph.input_names),
        *(Transfer(o, "cuda", "cpu", "") for o in graph.output_names),
    )


def test_a_node_pinned_to_the_host_splits_the_device_work_and_adds_copies(target) -> None:
    _, model, pins = MIXED
    graph = _graph(model)
    p = make_partition(graph, target, model, "d", PartitionOptions(pins=pins))
    assert [(r.id, r.target) for r in p.regions] == [("r0", "cuda"), ("r1", "c"), ("r2", "cuda")]
    assert p.regions[1].nodes == ("/fc2/Gemm",)
    assert p.transfers == (
        Transfer("x", "cpu", "cuda", "r0"),
        Transfer("/Relu_output_0", "cuda", "cpu", "r1"),
        Transfer("/fc2/Gemm_output_0", "cpu", "cuda", "r2"),
        Transfer("y", "cuda", "cpu", ""),
    )


def test_a_tensor_read_by_two_device_regions_is_copied_once() -> None:
    f32 = TensorType(DType.FLOAT32, (4,))
    nodes = (Node("a", "Relu", ("x",), ("t",)), Node("b", "Exp", ("x",), ("u",)),
             Node("c", "Add", ("t", "u"), ("y",)))
    graph = Graph("g", (Value("x", f32),), (Value("y", f32),), nodes,
                  tuple(Value(n, f32) for n in "xtuy"), (), 17)
    regions = (Region("r0", "cuda", ("a",)), Region("r1", "c", ("b",)),
               Region("r2", "cuda", ("c",)))
    assert plan_transfers(graph, regions) == (
        Transfer("x", "cpu", "cuda", "r0"), Transfer("u", "cpu", "cuda", "r2"),
        Transfer("y", "cuda", "cpu", ""),
    )


def test_transfers_survive_the_partition_file_and_old_files_still_load(tmp_path: Path) -> None:
    regions = (Region("r0", "cuda", ("a",)),)
    p = Partition("m", "gpu", "d", regions, (Transfer("x", "cpu", "cuda", "r0"),))
    path = tmp_path / "partition.json"
    path.write_text(dump_partition(p))
    assert load_partition(path) == p
    host_only = Partition("m", "cpu", "d", (Region("r0", "c", ("a",)),))
    doc = json.loads(dump_partition(host_only))
    assert "transfers" not in doc  # a host-only partition keeps the bytes it always had
    path.write_text(json.dumps(doc))
    assert load_partition(path).transfers == ()


def test_the_cost_policy_charges_the_copies(target) -> None:
    """A lone small Relu is cheaper on the host than copied to the GPU and back; the mlp's
    big GEMMs pay for their copies (its last, small one may not: 8x512x10)."""
    f32 = TensorType(DType.FLOAT32, (16,))
    tiny = Graph("g", (Value("x", f32),), (Value("y", f32),),
                 (Node("r", "Relu", ("x",), ("y",)),), (Value("x", f32), Value("y", f32)), (), 17)
    cost = PartitionOptions(policy="cost")
    assert [r.target for r in make_partition(tiny, target, "t", "d", cost).regions] == ["c"]
    graph = _graph("mlp")
    mlp = make_partition(graph, target, "mlp", "d", cost)
    on = {n: r.target for r in mlp.regions for n in r.nodes}
    assert on["/fc1/Gemm"] == on["/fc2/Gemm"] == "cuda"
    assert mlp.transfers == plan_transfers(graph, mlp.regions) != ()
