"""Pins: exact names, globs, regular expressions and op types, to a kind or to the host."""

import pytest
from partition_helpers import composite, graph, layout

from buildgen.errors import BuildgenError
from buildgen.ir import Node
from buildgen.partition import partition_graph
from buildgen.partition.pins import Pin
from buildgen.partition.pipeline import PartitionOptions


def _blocks():
    """Two MatMul+Add+Relu blocks named like a torch export, then a Softmax."""
    return graph(
        [
            Node("/l1/MatMul", "MatMul", ("x", "w1"), ("h1",)),
            Node("/l1/Add", "Add", ("h1", "b1"), ("a1",)),
            Node("/l1/Relu", "Relu", ("a1",), ("r1",)),
            Node("/l2/MatMul", "MatMul", ("r1", "w2"), ("h2",)),
            Node("/l2/Add", "Add", ("h2", "b2"), ("a2",)),
            Node("/l2/Relu", "Relu", ("a2",), ("r2",)),
            Node("/head/Softmax", "Softmax", ("r2",), ("y",)),
        ],
        {"x": (4, 8), "w1": (8, 8), "h1": (4, 8), "b1": (8,), "a1": (4, 8), "r1": (4, 8),
         "w2": (8, 8), "h2": (4, 8), "b2": (8,), "a2": (4, 8), "r2": (4, 8), "y": (4, 8)},
        weights=("w1", "b1", "w2", "b2"),
    )


def _partition(pins, *accelerators):
    target = composite(*(accelerators or ("tgemm", "tvec")))
    return partition_graph(_blocks(), target, "m", "d", PartitionOptions(pins=tuple(pins)))


@pytest.mark.parametrize(
    ("pattern", "names"),
    [
        ("/l1/Add", ["/l1/Add"]),
        ("/l*/Relu", ["/l1/Relu", "/l2/Relu"]),
        (r"re:/l\d/(Add|Relu)", ["/l1/Add", "/l1/Relu", "/l2/Add", "/l2/Relu"]),
        ("re:Add", []),  # a regular expression matches the whole name
        ("op:MatMul", ["/l1/MatMul", "/l2/MatMul"]),
    ],
)
def test_pin_patterns(pattern, names):
    assert [n.name for n in _blocks().nodes if Pin(pattern, "host").matches(n)] == names


def test_a_pin_to_the_host_is_never_overwritten_by_a_pattern(plugin):
    p = _partition([("/l2/Relu", "host")])
    assert layout(p) == [
        ("tgemm", ("/l1/MatMul", "/l1/Add", "/l1/Relu", "/l2/MatMul", "/l2/Add")),
        ("c", ("/l2/Relu",)),
        ("tvec", ("/head/Softmax",)),
    ]
    assert p.regions[1].reason == "pin '/l2/Relu' -> host"


def test_a_pin_to_a_lower_priority_accelerator_wins_over_the_first(plugin):
    p = _partition([("op:Add", "tvec")])
    assert layout(p)[:3] == [
        ("tgemm", ("/l1/MatMul",)), ("tvec", ("/l1/Add", "/l1/Relu")), ("tgemm", ("/l2/MatMul",)),
    ]
    assert "pattern tvec.eltwise" in p.regions[1].reason
    assert "pin 'op:Add' -> tvec" in p.regions[1].reason


def test_a_pinned_node_no_pattern_covers_alone_runs_alone_on_its_backend(plugin):
    # tvec's eltwise needs the Add first; pinning only the Relu gives tvec a lone Relu,
    # which its decline_reason accepts.
    p = _partition([("/l1/Relu", "tvec")])
    assert ("tvec", ("/l1/Relu",)) in layout(p)


def test_an_impossible_pin_names_the_node_and_the_backend(plugin):
    with pytest.raises(BuildgenError) as info:
        _partition([("/head/Softmax", "tgemm")])
    text = info.value.render()
    assert "pin '/head/Softmax' -> tgemm: backend tgemm cannot run node '/head/Softmax'" in text
    assert "(op Softmax): no tgemm pattern has Softmax" in text


def test_conflicting_pins_are_an_error_naming_both(plugin):
    with pytest.raises(BuildgenError) as info:
        _partition([("/l1/*", "host"), ("op:Add", "tvec")])
    text = info.value.render()
    assert "node '/l1/Add' (op Add) is pinned to c by pin '/l1/*' -> host" in text
    assert "and to tvec by pin 'op:Add' -> tvec" in text


def test_pins_that_agree_are_fine(plugin):
    p = _partition([("/l1/*", "host"), ("/l1/Add", "c")])
    assert layout(p)[0] == ("c", ("/l1/MatMul", "/l1/Add", "/l1/Relu"))


@pytest.mark.parametrize(
    ("pin", "message"),
    [
        (("/l1/Ad", "host"), "pin '/l1/Ad' -> host: matches no node of the model"),
        (("op:Conv", "host"), "pin 'op:Conv' -> host: matches no node of the model"),
        (("/l1/Add", "cuda"), "target 't' has no backend 'cuda'"),
        (("re:(", "host"), "invalid regular expression"),
    ],
)
def test_a_pin_that_cannot_apply_is_an_error(plugin, pin, message):
    with pytest.raises(BuildgenError, match=None) as info:
        _partition([pin])
    assert message in info.value.render()


def test_a_misspelt_pin_gets_a_suggestion(plugin):
    with pytest.raises(BuildgenError) as info:
        _partition([("/l1/Ad", "host"), ("/l1/Add", "tgem")])
    text = info.value.render()
    assert "did you mean '/l1/Add'?" in text and "did you mean 'tgemm'?" in text
