"""The policies on the committed example models with buildgen's CPU backends (partition
only: nothing is compiled here)."""

from pathlib import Path

import pytest
import yaml
from partition_helpers import layout

from buildgen import stages
from buildgen.errors import BuildgenError
from buildgen.partition.convexity import region_cycle

REPO = Path(__file__).resolve().parents[2]
MODELS = yaml.safe_load((REPO / "BUILD.yaml").read_text())["models"]
CONTRACTIONS = {"MatMul", "Gemm", "Conv"}


@pytest.fixture(scope="module")
def imported():
    return {
        name: stages.import_model(REPO / spec["source"], spec["inputs"], name=name)
        for name, spec in MODELS.items()
    }


def _target(*accelerators: str):
    return stages.resolve_target(
        {"kind": "composite", "host": {"kind": "c"}, "accelerators": list(accelerators)}
    )


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("policy", ["priority", "cost"])
def test_every_node_once_and_no_cycle(imported, model, policy):
    graph = imported[model].graph
    p = stages.partition(graph, _target("onednn", "openblas"), model=model, policy=policy)
    nodes = [n for r in p.regions for n in r.nodes]
    assert sorted(nodes) == sorted(n.name for n in graph.nodes)
    assert region_cycle(graph, [r.nodes for r in p.regions]) is None
    assert [r.id for r in p.regions] == [f"r{i}" for i in range(len(p.regions))]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_first_accelerator_gets_the_contractions_both_can_run(imported, model):
    graph = imported[model].graph
    for first, second in (("onednn", "openblas"), ("openblas", "onednn")):
        p = stages.partition(graph, _target(first, second), model=model)
        on = {n: r.target for r in p.regions for n in r.nodes}
        contractions = [n.name for n in graph.nodes if n.op in CONTRACTIONS]
        assert contractions and all(on[n] != second for n in contractions), (first, layout(p))
        assert any(on[n] == first for n in contractions)


def test_an_impossible_pin_on_an_example_names_node_and_backend(imported):
    graph = imported["encoder"].graph
    with pytest.raises(BuildgenError) as info:
        stages.partition(graph, _target("onednn", "openblas"), pins={"op:Transpose": "onednn"})
    text = info.value.render()
    assert "pin 'op:Transpose' -> onednn: backend onednn cannot run node '/Transpose'" in text
