"""A user's partition (file or step): what is kept, what the policy fills, what is refused."""

import json

import pytest
from partition_helpers import composite, graph, layout

from buildgen import stages
from buildgen.errors import BuildgenError
from buildgen.ir import Node
from buildgen.partition.model import Partition, Region
from buildgen.partition.pipeline import PartitionOptions


def _chain():
    return graph(
        [
            Node("a", "Add", ("x", "z"), ("s",)),
            Node("e", "Exp", ("s",), ("t",)),
            Node("m", "Mul", ("t", "s"), ("u",)),
            Node("r", "Relu", ("u",), ("y",)),
        ],
        {"x": (4, 4), "z": (4, 4), "s": (4, 4), "t": (4, 4), "u": (4, 4), "y": (4, 4)},
    )


def _partition(regions, pins=(), target=None, step=None):
    start = Partition("m", "t", "", tuple(
        Region(f"u{i}", t, tuple(nodes)) for i, (t, nodes) in enumerate(regions)
    ))
    return stages.partition(_chain(), target or composite("tvec"), model="m", pins=pins,
                            start=start, step=step)


def test_regions_with_a_target_are_kept_and_the_rest_is_the_policys(plugin):
    p = _partition([("host", ["a"]), ("", ["m"])])
    # a stays on the host as its own region; m (no target), e and r are the policy's:
    # tvec takes Mul+Relu, the host Exp.
    assert layout(p) == [("c", ("a",)), ("c", ("e",)), ("tvec", ("m", "r"))]
    assert [r.reason for r in p.regions] == [
        "set by the starting partition", "host fallback", "pattern tvec.eltwise (priority 0)"]


@pytest.mark.parametrize(
    ("regions", "message"),
    [
        ([("c", ["a", "ee"])], "no node 'ee' in the model (did you mean 'e'?)"),
        ([("", ["ee"])], "region u0: no node 'ee' in the model"),
        ([("c", ["a"]), ("c", ["a"])], "node 'a' is already in region u0"),
        ([("tvec", ["e"])], "backend tvec cannot run node 'e' (op Exp): no tvec pattern has Exp"),
        ([("cuda", ["e"])], "target 't' has no backend 'cuda'"),
        ([("c", ["a", "m"])], "its nodes are not convex"),
    ],
)
def test_a_users_partition_that_cannot_be_built_is_refused(plugin, regions, message):
    with pytest.raises(BuildgenError) as info:
        _partition(regions)
    assert message in info.value.render()


def test_regions_that_depend_on_each_other_both_ways_are_refused(plugin):
    # Each region is convex, but X feeds Y (p1 -> q1) and Y feeds X (p2 -> q2).
    g = graph(
        [Node("p1", "Relu", ("x",), ("a",)), Node("p2", "Exp", ("x",), ("b",)),
         Node("q1", "Add", ("a", "b"), ("c",)), Node("q2", "Mul", ("a", "b"), ("d",)),
         Node("o", "Sub", ("c", "d"), ("y",))],
        {"x": (2,), "a": (2,), "b": (2,), "c": (2,), "d": (2,), "y": (2,)},
    )
    start = Partition("m", "t", "", (Region("X", "c", ("p1", "q2")),
                                     Region("Y", "c", ("p2", "q1"))))
    with pytest.raises(BuildgenError) as info:
        stages.partition(g, composite("tvec"), start=start)
    assert "depend on each other in a cycle (['p1', 'q2'] -> ['p2', 'q1'])" in (
        info.value.render()
    )


def test_a_pin_that_contradicts_the_users_partition_is_an_error(plugin):
    with pytest.raises(BuildgenError) as info:
        _partition([("tvec", ["m"])], pins={"m": "host"})
    assert "puts node 'm' on tvec, but pin 'm' -> host puts it on c" in info.value.render()


def test_a_step_rewrites_the_policys_partition(plugin):
    def everything_on_host(graph, target, partition):
        nodes = tuple(n.name for n in graph.nodes)
        return Partition(partition.model, partition.target, partition.graph_digest,
                         (Region("all", "c", nodes),))

    p = _partition([], step=everything_on_host)
    assert layout(p) == [("c", ("a", "e", "m", "r"))]
    assert p.regions[0].id == "r0"
    assert p.regions[0].reason == "set by step everything_on_host"


def test_a_step_must_return_a_partition(plugin):
    with pytest.raises(BuildgenError, match="returned list, not a buildgen.partition.Partition"):
        _partition([], step=lambda g, t, p: [])


def test_partition_files_are_checked_and_read(plugin, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "buildgen-partition", "version": 1,
                                "regions": [{"target": "host", "nodes": ["m"]}]}))
    p = stages.partition(_chain(), composite("tvec"), start=path)
    assert ("c", ("m",)) in layout(p)
    assert "set by partition file p.json" in {r.reason for r in p.regions}
    path.write_text(json.dumps({"format": "buildgen-partition", "version": 2, "regions": []}))
    with pytest.raises(BuildgenError, match="partition file version 2"):
        stages.partition(_chain(), composite("tvec"), start=path)
    path.write_text(json.dumps({"format": "buildgen-partition", "version": 1,
                                "regions": [{"target": "c", "nodes": "m"}]}))
    with pytest.raises(BuildgenError, match=r"regions\[0\]: 'nodes' must be a list"):
        stages.partition(_chain(), composite("tvec"), start=path)


def test_a_saved_partition_handed_back_reproduces_itself(plugin, tmp_path):
    g, target = _chain(), composite("tvec")
    first = stages.partition(g, target, model="m")
    stages.save_partition(first, tmp_path / "p.json")
    again = stages.partition(g, target, model="m", start=tmp_path / "p.json")
    assert layout(again) == layout(first)
    assert stages.load_partition(tmp_path / "p.json") == first


def test_an_unknown_policy_is_an_error(plugin):
    from buildgen.partition import partition_graph

    with pytest.raises(BuildgenError, match="unknown partition policy 'fastest'"):
        partition_graph(_chain(), composite("tvec"), "m", "d", PartitionOptions(policy="fastest"))
