"""The priority policy on hand-built graphs with the test accelerators (tgemm, tvec, tall)."""

from partition_helpers import composite, graph, layout

from buildgen.ir import Node
from buildgen.partition import partition_graph
from buildgen.partition.convexity import region_cycle


def _mlp():
    """x -> MatMul+Add+Relu -> MatMul+Add -> Softmax -> Exp."""
    return graph(
        [
            Node("mm1", "MatMul", ("x", "w1"), ("h1",)),
            Node("add1", "Add", ("h1", "b1"), ("a1",)),
            Node("relu1", "Relu", ("a1",), ("r1",)),
            Node("mm2", "MatMul", ("r1", "w2"), ("h2",)),
            Node("add2", "Add", ("h2", "b2"), ("a2",)),
            Node("sm", "Softmax", ("a2",), ("s",), (("axis", -1),)),
            Node("exp", "Exp", ("s",), ("y",)),
        ],
        {"x": (8, 16), "w1": (16, 32), "h1": (8, 32), "b1": (32,), "a1": (8, 32),
         "r1": (8, 32), "w2": (32, 10), "h2": (8, 10), "b2": (10,), "a2": (8, 10),
         "s": (8, 10), "y": (8, 10)},
        weights=("w1", "b1", "w2", "b2"),
    )


def test_accelerators_claim_patterns_and_the_host_takes_the_rest(plugin):
    p = partition_graph(_mlp(), composite("tgemm", "tvec"), "m", "d")
    assert layout(p) == [
        ("tgemm", ("mm1", "add1", "relu1", "mm2", "add2")),  # two matches that touch: merged
        ("tvec", ("sm",)),
        ("c", ("exp",)),
    ]
    assert [r.id for r in p.regions] == ["r0", "r1", "r2"]
    assert p.regions[0].pattern == "tgemm.gemm_bias_act"
    assert p.regions[0].reason == "pattern tgemm.gemm_bias_act (priority 20)"
    assert p.regions[1].pattern == "tvec.softmax" and p.regions[2].reason == "host fallback"


def test_the_composite_order_decides_who_claims_first(plugin):
    p = partition_graph(_mlp(), composite("tvec", "tgemm"), "m", "d")
    # tvec first: its eltwise pattern takes Add+Relu and Add; tgemm keeps the MatMuls alone.
    assert layout(p) == [
        ("tgemm", ("mm1",)), ("tvec", ("add1", "relu1")), ("tgemm", ("mm2",)),
        ("tvec", ("add2", "sm")), ("c", ("exp",)),
    ]


def test_an_accelerator_without_patterns_claims_every_node_it_accepts(plugin):
    p = partition_graph(_mlp(), composite("tall", "tgemm"), "m", "d")
    assert layout(p) == [("tall", tuple(n.name for n in _mlp().nodes))]
    assert p.regions[0].reason == (
        "accelerator 1 of the target, which accepts the node (no pattern table)"
    )


def test_larger_matches_win_among_equal_priorities(plugin):
    plugin({"tvec": (
        "patterns:\n"
        "  - {name: relu, ops: [Relu]}\n"
        "  - {name: add_relu, ops: [Add, \"Relu?\"]}\n"
    )})
    p = partition_graph(_mlp(), composite("tvec"), "m", "d")
    assert ("tvec", ("add1", "relu1")) in layout(p)
    assert p.regions[1].pattern == "tvec.add_relu"


def test_regions_of_one_backend_never_merge_into_a_cycle(plugin):
    # s feeds both the host's Exp and the Mul: tvec[add] -> c[exp] -> tvec[mul], and
    # tvec[add] -> tvec[mul] directly. Merging the two tvec regions would make them depend
    # on each other through the host region.
    g = graph(
        [
            Node("add", "Add", ("x", "z"), ("s",)),
            Node("exp", "Exp", ("s",), ("e",)),
            Node("mul", "Mul", ("e", "s"), ("y",)),
        ],
        {"x": (4, 4), "z": (4, 4), "s": (4, 4), "e": (4, 4), "y": (4, 4)},
    )
    naive = [["add", "mul"], ["exp"]]
    assert region_cycle(g, naive) is not None  # the merge a naive partitioner would make
    p = partition_graph(g, composite("tvec"), "m", "d")
    assert layout(p) == [("tvec", ("add",)), ("c", ("exp",)), ("tvec", ("mul",))]
    assert region_cycle(g, [r.nodes for r in p.regions]) is None


def test_independent_regions_of_one_backend_merge_when_they_run_next_to_each_other(plugin):
    # Two parallel branches, each MatMul+Relu: tgemm's two matches share no tensor, but
    # nothing has to run between them, so they become one region.
    g = graph(
        [
            Node("mma", "MatMul", ("x", "wa"), ("ha",)),
            Node("relua", "Relu", ("ha",), ("ra",)),
            Node("mmb", "MatMul", ("x", "wb"), ("hb",)),
            Node("relub", "Relu", ("hb",), ("rb",)),
            Node("add", "Exp", ("ra",), ("ea",)),
            Node("cat", "Sub", ("ea", "rb"), ("y",)),
        ],
        {"x": (2, 4), "wa": (4, 4), "wb": (4, 4), "ha": (2, 4), "hb": (2, 4), "ra": (2, 4),
         "rb": (2, 4), "ea": (2, 4), "y": (2, 4)},
        weights=("wa", "wb"),
    )
    p = partition_graph(g, composite("tgemm"), "m", "d")
    assert layout(p) == [("tgemm", ("mma", "relua", "mmb", "relub")), ("c", ("add", "cat"))]


def test_the_partition_is_deterministic_and_covers_every_node_once(plugin):
    g = _mlp()
    first = partition_graph(g, composite("tvec", "tgemm"), "m", "d")
    assert first == partition_graph(g, composite("tvec", "tgemm"), "m", "d")
    nodes = [n for r in first.regions for n in r.nodes]
    assert sorted(nodes) == sorted(n.name for n in g.nodes)
