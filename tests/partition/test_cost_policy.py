"""The cost policy: the cheapest cover by every backend's candidates, from tuning records."""

import json
from pathlib import Path

import pytest
from partition_helpers import composite, graph, layout

from buildgen.ir import Graph, Node
from buildgen.partition import partition_graph
from buildgen.partition.convexity import NodeGraph, region_cycle
from buildgen.partition.cost.keys import backend_options, key_text
from buildgen.partition.cost.policy import CostTable, cost_candidates
from buildgen.partition.cost.records import Record, Records, load_records
from buildgen.partition.cost.search import cheapest_cover
from buildgen.partition.pins import resolve_pins
from buildgen.partition.pipeline import PartitionOptions
from buildgen.partition.policy import PolicyInput
from buildgen.partition.priority import partition_priority
from buildgen.targets import ResolvedTarget, parse_target

US = 1e-6
UNLISTED = 1000 * US  # a candidate the test gives no time to is never worth taking


def _mlp() -> Graph:
    return graph(
        [
            Node("mm1", "MatMul", ("x", "w1"), ("h1",)),
            Node("add1", "Add", ("h1", "b1"), ("a1",)),
            Node("relu1", "Relu", ("a1",), ("r1",)),
            Node("mm2", "MatMul", ("r1", "w2"), ("h2",)),
            Node("add2", "Add", ("h2", "b2"), ("a2",)),
            Node("sm", "Softmax", ("a2",), ("y",)),
        ],
        {"x": (8, 16), "w1": (16, 32), "h1": (8, 32), "b1": (32,), "a1": (8, 32),
         "r1": (8, 32), "w2": (32, 10), "h2": (8, 10), "b2": (10,), "a2": (8, 10), "y": (8, 10)},
        weights=("w1", "b1", "w2", "b2"),
    )


# Measured times, in microseconds, by (backend, nodes). tgemm is fast at the first block
# and very slow at the second (think: a shape its kernels handle badly); tall is slow at
# the first MatMul but good at everything else; the host is middling.
TIMES = {
    ("tgemm", ("mm1", "add1", "relu1")): 10, ("tgemm", ("mm1", "add1")): 9,
    ("tgemm", ("mm1",)): 8, ("tgemm", ("mm2", "add2")): 200, ("tgemm", ("mm2",)): 200,
    ("tall", ("mm1",)): 100, ("tall", ("add1",)): 1, ("tall", ("relu1",)): 1,
    ("tall", ("mm2",)): 20, ("tall", ("add2",)): 1, ("tall", ("sm",)): 2,
    ("c", ("mm1",)): 50, ("c", ("add1",)): 3, ("c", ("relu1",)): 3, ("c", ("mm2",)): 50,
    ("c", ("add2",)): 3, ("c", ("sm",)): 10,
}


def _records(g: Graph, target: ResolvedTarget, times=TIMES) -> Records:
    """A record for every candidate of every backend: the time in `times`, else UNLISTED."""
    inp = PolicyInput(g, NodeGraph(g), target, {})
    table = CostTable(g, target, None)
    records = []
    for cand in cost_candidates(inp):
        names = tuple(g.nodes[i].name for i in cand.nodes)
        seconds = times.get((cand.backend, names), UNLISTED / US) * US
        records.append(Record(key_text(table.key(cand)), seconds, 10))
    return Records({r.key: r for r in records}, "test.records.json")


def _cover_cost(pairs) -> float:
    return sum(TIMES.get(pair, UNLISTED / US) for pair in pairs)


def test_the_cost_policy_beats_priority_order_and_all_on_one_accelerator(plugin):
    g, target = _mlp(), composite("tgemm", "tall")
    records = _records(g, target)
    p = partition_graph(g, target, "m", "d", PartitionOptions(policy="cost", records=records))
    assert layout(p) == [("tgemm", ("mm1", "add1", "relu1")),
                         ("tall", ("mm2", "add2", "sm"))]
    chosen = _cover_cost([("tgemm", ("mm1", "add1", "relu1")), ("tall", ("mm2",)),
                          ("tall", ("add2",)), ("tall", ("sm",))])
    assert chosen == 33
    # A record's time plus what a call costs in a compiled model (tgemm's call_us is 0.5,
    # tall's the accelerators' default 1).
    assert p.regions[0].reason == "cost 10.5 us: tuning record test.records.json"
    assert p.regions[1].reason == "cost 26 us over 3 kernels: tuning record test.records.json x3"
    # What the priority policy chooses for the same target, costed with the same records:
    units = partition_priority(PolicyInput(g, NodeGraph(g), target, {}), "m")
    by_priority = _cover_cost(
        [(u.target, tuple(g.nodes[i].name for i in u.nodes)) for u in units]
    )
    assert by_priority == 10 + 200 + 2  # tgemm takes both blocks, tall the Softmax
    all_on_tall = _cover_cost([("tall", (n.name,)) for n in g.nodes])
    assert all_on_tall == 125
    assert chosen < by_priority and chosen < all_on_tall


def test_records_are_read_from_a_file_and_missing_ones_fall_back_to_the_estimate(
    plugin, tmp_path: Path
):
    g, target = _mlp(), composite("tgemm", "tall")
    path = tmp_path / "cpu.records.json"
    path.write_text(_records(g, target).dump())
    loaded = load_records(path)
    assert loaded.source == "cpu.records.json" and len(loaded.by_key) > 10
    p = partition_graph(g, target, "m", "d", PartitionOptions(policy="cost", records=loaded))
    assert "tuning record cpu.records.json" in p.regions[0].reason
    estimated = partition_graph(g, target, "m", "d", PartitionOptions(policy="cost"))
    assert all("analytic estimate" in r.reason for r in estimated.regions)


def test_pins_restrict_the_cost_policy(plugin):
    g, target = _mlp(), composite("tgemm", "tall")
    options = PartitionOptions(policy="cost", records=_records(g, target),
                               pins=(("mm2", "host"),))
    p = partition_graph(g, target, "m", "d", options)
    assert ("c", ("mm2",)) in layout(p)
    assert any("pin 'mm2' -> host" in r.reason for r in p.regions)


def test_equal_costs_are_broken_the_same_way_every_time(plugin):
    g, target = _mlp(), composite("tgemm", "tall")
    cands = cost_candidates(PolicyInput(g, NodeGraph(g), target, {}))
    # Every cover costs the same: 5 per node, whoever runs it.
    costs = [5 * len(c.nodes) for c in cands]
    runs = {tuple(cheapest_cover(g, cands, costs, "c")) for _ in range(3)}
    assert len(runs) == 1
    chosen = [cands[i] for i in runs.pop()]
    # Ties go to the earlier candidate at each step: the target's first backend, the
    # larger match.
    assert (chosen[0].backend, chosen[0].nodes) == ("tgemm", (0, 1, 2))


def test_the_cover_never_has_a_cycle_between_regions(plugin):
    g = graph(
        [Node("add", "Add", ("x", "z"), ("s",)), Node("exp", "Exp", ("s",), ("e",)),
         Node("mul", "Mul", ("e", "s"), ("y",))],
        {"x": (4, 4), "z": (4, 4), "s": (4, 4), "e": (4, 4), "y": (4, 4)},
    )
    p = partition_graph(g, composite("tvec"), "m", "d", PartitionOptions(policy="cost"))
    assert region_cycle(g, [r.nodes for r in p.regions]) is None


@pytest.mark.parametrize(("link", "where"), [(1, "c"), (1e6, "tdev")])
def test_moving_tensors_to_a_device_counts(plugin, link, where):
    # tdev is 25x faster at the big MatMul than the host; whether that pays depends on
    # copying its input and output (256 KiB each) over its link: 50 us + bytes at `link`
    # GB/s each way, 2 x 312 us at 1 GB/s (the host wins), 2 x 50 us at 1 PB/s (tdev wins).
    plugin({"tdev": f"cost: {{transfer_gbytes_per_s: {link}, transfer_us: 50}}\n"})
    g = graph([Node("mm", "MatMul", ("x", "w"), ("y",))],
              {"x": (256, 256), "w": (256, 256), "y": (256, 256)}, weights=("w",))
    target = composite("tall")
    target = ResolvedTarget(target.name, target.host, _tdev(), ())
    times = {("c", ("mm",)): 500, ("tdev", ("mm",)): 20}
    p = partition_graph(g, target, "m", "d",
                        PartitionOptions(policy="cost", records=_records(g, target, times)))
    assert layout(p) == [(where, ("mm",))]


def _tdev():
    from buildgen.targets import TargetInstance, get_kind

    return TargetInstance.make("tdev", get_kind("tdev").defaults())


def test_candidates_respect_pins_and_include_the_hosts_fused_chains(plugin):
    g, target = _mlp(), composite("tgemm")
    inp = PolicyInput(g, NodeGraph(g), target, resolve_pins(g, target, [("add1", "tgemm")]))
    cands = {(c.backend, tuple(g.nodes[i].name for i in c.nodes)) for c in cost_candidates(inp)}
    assert ("c", ("mm1", "add1", "relu1")) not in cands  # add1 is pinned to tgemm
    assert ("c", ("mm2", "add2")) in cands  # the host offers tgemm's chain as one kernel
    assert ("tgemm", ("mm1", "add1", "relu1")) in cands
    assert ("c", ("add1",)) not in cands


@pytest.mark.parametrize(("layout", "keyed_as"), [
    (None, "channels_last"), ("auto", "channels_last"), ("channels_last", "channels_last"),
    ("any", "any"), ("plain", "plain"),
])
def test_a_symbolic_option_keys_as_what_it_resolves_to_for_one_kernel(layout, keyed_as):
    """onednn's default `activation_layout: auto` runs a kernel measured alone channels-last,
    so records measured before `auto` became the default keep matching."""
    onednn = {"kind": "onednn"} if layout is None else {"kind": "onednn",
                                                        "activation_layout": layout}
    target = parse_target({"kind": "composite", "host": {"kind": "c"},
                           "accelerators": [onednn]}, "t")
    options = backend_options(target, "onednn")
    assert options["activation_layout"] == keyed_as
    assert "kind" not in options and "compiler_launcher" not in options  # affects: none


def test_the_committed_records_match_the_default_onednn_target():
    """examples/tuning/cpu.records.json was measured with the onednn defaults of its day."""
    records = load_records(Path(__file__).parents[2] / "examples/tuning/cpu.records.json")
    target = parse_target({"kind": "composite", "host": {"kind": "c", "march": "x86-64-v3"},
                           "accelerators": ["onednn"]}, "t")
    options = backend_options(target, "onednn")
    keyed = [json.loads(k)["options"] for k in records.by_key if '"backend":"onednn"' in k]
    assert keyed and all(o == options for o in keyed), (keyed[0], options)
