"""Pattern tables: loading and checking `patterns:` in rules files, and matching them."""

import pytest
from partition_helpers import graph

from buildgen.errors import BuildgenError
from buildgen.ir import Node
from buildgen.partition.matcher import find_matches, matches_at, why_unmatched
from buildgen.targets import get_kind


def _mlp(bias_shape=(32,), width=32):
    return graph(
        [
            Node("mm", "MatMul", ("x", "w"), ("h",)),
            Node("add", "Add", ("h", "b"), ("hb",)),
            Node("relu", "Relu", ("hb",), ("y",)),
        ],
        {"x": (8, 16), "w": (16, width), "h": (8, width), "b": bias_shape,
         "hb": (8, width), "y": (8, width)},
        weights=("w", "b"),
    )


def test_patterns_are_loaded_from_the_rules_file_in_declaration_order(plugin):
    specs = get_kind("tgemm").patterns
    assert [s.qualified_name for s in specs] == ["tgemm.gemm_bias_act", "tgemm.gemm"]
    first = specs[0]
    assert first.priority == 20 and first.dtypes == ("float32",)
    assert [str(s) for s in first.steps] == ["MatMul", "Add?", "Relu|Sigmoid?"]
    assert first.where_for("MatMul").const_inputs == (1,)
    assert first.where_for("MatMul").input_rank == ((1, (2,)),)
    assert first.predicate == "bgpart.predicates:not_too_wide"
    assert get_kind("tgemm").cost.matmul_gflops == 200


def test_every_valid_chain_from_a_start_is_a_match_longest_first(plugin):
    g = _mlp()
    spec = get_kind("tgemm").patterns[0]
    chains = [m.nodes for m in matches_at(g, spec, g.node("mm"))]
    assert chains == [("mm", "add", "relu"), ("mm", "add"), ("mm",)]
    assert matches_at(g, spec, g.node("add")) == []  # the chain starts at MatMul only


def test_where_bias_of_rejects_a_weight_that_is_not_a_bias(plugin):
    g = _mlp(bias_shape=(8, 32))  # a full matrix, not a bias over the 32 columns
    spec = get_kind("tgemm").patterns[0]
    assert [m.nodes for m in matches_at(g, spec, g.node("mm"))] == [("mm",)]
    assert why_unmatched(g, (spec,), g.node("add")) == (
        "tgemm.gemm_bias_act take Add only in a chain after MatMul")


def test_the_predicate_declines_what_where_cannot_say(plugin):
    g = _mlp(bias_shape=(5000,), width=5000)
    spec = get_kind("tgemm").patterns[0]
    assert matches_at(g, spec, g.node("mm")) == []
    assert "5000 columns (more than 4096)" in why_unmatched(g, (spec,), g.node("mm"))


def test_where_checks_weights_ranks_and_attributes(plugin):
    g = graph(
        [Node("mm", "MatMul", ("x", "w"), ("h",)),
         Node("sm", "Softmax", ("h",), ("y",), (("axis", 0),))],
        {"x": (8, 16), "w": (8, 16, 4), "h": (8, 8, 4), "y": (8, 8, 4)},
    )  # w is an input here, not a weight
    gemm = get_kind("tgemm").patterns[0]
    assert "input 1 is not a weight" in why_unmatched(g, (gemm,), g.node("mm"))
    softmax = get_kind("tvec").patterns[0]
    assert "attribute axis=0 is not one of" in why_unmatched(g, (softmax,), g.node("sm"))
    last = graph([Node("sm", "Softmax", ("h",), ("y",), (("axis", 2),))],
                 {"h": (8, 8, 4), "y": (8, 8, 4)})
    absent = graph([Node("sm", "Softmax", ("h",), ("y",))], {"h": (8, 4), "y": (8, 4)})
    assert [m.nodes for m in find_matches(last, (softmax,))] == [("sm",)]
    assert [m.nodes for m in find_matches(absent, (softmax,))] == [("sm",)]


def test_a_chain_stops_at_a_tensor_with_another_reader(plugin):
    g = graph(
        [Node("mm", "MatMul", ("x", "w"), ("h",)),
         Node("relu", "Relu", ("h",), ("r",)),
         Node("exp", "Exp", ("h",), ("e",)),
         Node("add", "Add", ("r", "e"), ("y",))],
        {"x": (8, 16), "w": (16, 4), "h": (8, 4), "r": (8, 4), "e": (8, 4), "y": (8, 4)},
        weights=("w",),
    )
    spec = get_kind("tgemm").patterns[0]
    assert [m.nodes for m in matches_at(g, spec, g.node("mm"))] == [("mm",)]


def test_claiming_order_is_priority_then_size_then_declaration(plugin):
    g = _mlp()
    tables = get_kind("tvec").patterns + get_kind("tgemm").patterns
    order = [(m.pattern.qualified_name, m.nodes) for m in find_matches(g, tables)]
    assert order[0] == ("tgemm.gemm_bias_act", ("mm", "add", "relu"))
    assert order.index(("tvec.eltwise", ("add", "relu"))) > order.index(
        ("tgemm.gemm_bias_act", ("mm",))
    )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("patterns:\n  - {name: a, ops: [MatMul]}\n  - {name: a, ops: [Gemm]}\n",
         "patterns[1] (a): the name is already used by patterns[0]"),
        ("patterns:\n  - {name: a, ops: [MatMul], where: {Relu: {const_inputs: [0]}}}\n",
         "where: 'Relu' is not an op of the chain (MatMul)"),
        ("patterns:\n  - {name: a, ops: [Add, MatMul], where: {Add: {bias_of: MatMul}}}\n",
         "Add.bias_of: 'MatMul' is not an op before Add"),
        ("patterns:\n  - {name: a, ops: [\"Relu?\"]}\n", "every step is optional"),
    ],
)
def test_a_mistake_in_a_pattern_table_names_the_entry(plugin, table, message):
    with pytest.raises(BuildgenError) as info:
        plugin({"tvec": table})
        get_kind("tvec")
    assert message in info.value.render() and "tvec.yaml" in info.value.render()


def test_the_rules_schema_rejects_an_unknown_where_key_at_its_line(plugin):
    table = "patterns:\n  - name: a\n    ops: [MatMul]\n    where: {MatMul: {const_input: [1]}}\n"
    with pytest.raises(BuildgenError) as info:
        plugin({"tvec": table})
        get_kind("tvec")
    text = info.value.render()
    assert "unknown key 'const_input'" in text and "did you mean 'const_inputs'?" in text
    assert "tvec.yaml:" in text
