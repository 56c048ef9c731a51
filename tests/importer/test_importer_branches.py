"""If nodes flattened at import (buildgen/importer/branches.py): both branches and a
select, a constant condition picking its branch, and the Ifs that are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_builders import F32, make_model, save

from buildgen.errors import BuildgenError
from buildgen.importer import import_model


def _branch(name: str, nodes: list[onnx.NodeProto], output: str, shape: list[int],
            weights: dict[str, np.ndarray] | None = None) -> onnx.GraphProto:
    return helper.make_graph(
        nodes, name, [], [helper.make_tensor_value_info(output, F32, shape)],
        [onnx.numpy_helper.from_array(v, k) for k, v in (weights or {}).items()],
    )


def gated_model(then_shape: list[int] | None = None) -> onnx.ModelProto:
    """hey_jarvis's shape: a score, and a second network that runs only past a threshold.
    The then branch has a weight of its own and reads `x` from the outer graph."""
    rng = np.random.default_rng(5)
    then = _branch("verify", [
        helper.make_node("MatMul", ["x", "vw"], ["vh"], name="verify_mm"),
        helper.make_node("Sigmoid", ["vh"], ["p2"], name="verify_sigmoid"),
    ], "p2", then_shape or [1, 1], {"vw": rng.standard_normal((8, 1)).astype(np.float32)})
    other = _branch("keep", [helper.make_node("Identity", ["p1"], ["kept"])], "kept", [1, 1])
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="score_mm"),
        helper.make_node("Sigmoid", ["h"], ["p1"], name="score"),
        helper.make_node("GreaterOrEqual", ["p1", "half"], ["pass"], name="threshold"),
        helper.make_node("If", ["pass"], ["y"], name="gate", then_branch=then,
                         else_branch=other),
    ]
    return make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, [1, 8])],
        [helper.make_tensor_value_info("y", F32, [1, 1])],
        {"w": rng.standard_normal((8, 1)).astype(np.float32),
         "half": np.array(0.5, np.float32)},
    )


def _then_branch(model: onnx.ModelProto) -> onnx.GraphProto:
    gate = model.graph.node[-1]
    return next(a.g for a in gate.attribute if a.name == "then_branch")


def test_both_branches_run_and_a_select_keeps_one(tmp_path: Path) -> None:
    graph = import_model(save(gated_model(), tmp_path), {}).graph
    ops = {node.name: node.op for node in graph.nodes}
    assert "If" not in ops.values()
    assert ops["gate"] == "Where"  # the If's name stays on its result
    assert ops["gate/then/verify_mm"] == "MatMul" and ops["score_mm"] == "MatMul"
    assert graph.type_of("y").shape == (1, 1)


def test_a_constant_condition_keeps_only_its_branch(tmp_path: Path) -> None:
    model = gated_model()
    threshold = next(n for n in model.graph.node if n.name == "threshold")
    threshold.op_type, threshold.input[:] = "Identity", ["always"]  # a constant true
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(True), "always"))
    graph = import_model(save(model, tmp_path), {}).graph
    names = {node.name for node in graph.nodes}
    assert "gate/then/verify_mm" in names
    assert not any(node.op == "Where" for node in graph.nodes)
    assert "score_mm" not in names  # the score only fed the else branch and the condition


def test_branches_of_different_shapes_are_refused(tmp_path: Path) -> None:
    model = gated_model(then_shape=[1, 1])
    then = _then_branch(model)
    then.node[0].op_type = "Mul"  # [1, 8] * [8, 1] broadcasts to [8, 8]
    # (Declared [1, 1], the branch's output and y would fail ONNX's shape inference first.)
    then.output[0].type.tensor_type.ClearField("shape")
    model.graph.output[0].type.tensor_type.ClearField("shape")
    with pytest.raises(BuildgenError, match=r"node 'gate' \(If\): its branches give 'y' "
                                            r"different shapes \(\[8, 8\] and \[1, 1\]\)"):
        import_model(save(model, tmp_path), {})


def test_a_branch_that_can_fail_on_the_other_branchs_data_is_refused(tmp_path: Path) -> None:
    model = gated_model()
    then = _then_branch(model)
    then.node.insert(0, helper.make_node("Gather", ["x", "at"], ["picked"], name="pick",
                                         axis=1))
    then.output[0].name = "picked"  # [1, 1]: x's first column
    model.graph.input.append(helper.make_tensor_value_info("at", TensorProto.INT64, [1]))
    with pytest.raises(BuildgenError, match=r"node 'gate' \(If\): its branches run both, "
                                            r"and 'gate/then/pick' \(Gather\) can fail"):
        import_model(save(model, tmp_path), {})
    # Of constant indices (what Shape arithmetic folds into), a Gather cannot fail.
    del model.graph.input[-1]
    then.initializer.append(onnx.numpy_helper.from_array(np.array([0], np.int64), "at"))
    graph = import_model(save(model, tmp_path), {}).graph
    assert any(node.op == "Gather" for node in graph.nodes)


def test_nested_ifs_read_the_enclosing_branchs_values(tmp_path: Path) -> None:
    """An If inside a branch reads a value of that branch by its name there, which the
    flattening renames: the inner read must follow."""
    inner = _branch("inner", [helper.make_node("Neg", ["t"], ["n"])], "n", [2])
    inner_else = _branch("inner_else", [helper.make_node("Identity", ["t"], ["i"])], "i", [2])
    outer_then = _branch("outer_then", [
        helper.make_node("Relu", ["x"], ["t"], name="relu"),
        helper.make_node("If", ["c2"], ["r"], name="inner_if", then_branch=inner,
                         else_branch=inner_else),
    ], "r", [2])
    outer_else = _branch("outer_else", [helper.make_node("Abs", ["x"], ["a"])], "a", [2])
    model = make_model(
        [helper.make_node("If", ["c1"], ["y"], name="outer_if", then_branch=outer_then,
                          else_branch=outer_else)],
        [helper.make_tensor_value_info("x", F32, [2]),
         helper.make_tensor_value_info("c1", TensorProto.BOOL, []),
         helper.make_tensor_value_info("c2", TensorProto.BOOL, [1])],
        [helper.make_tensor_value_info("y", F32, [2])],
    )
    graph = import_model(save(model, tmp_path), {}).graph
    neg = next(node for node in graph.nodes if node.op == "Neg")
    relu = next(node for node in graph.nodes if node.op == "Relu")
    assert neg.inputs == relu.outputs
    assert neg.name == "outer_if/then/inner_if/then/Neg"


def test_a_branch_not_taken_at_these_shapes_is_never_inferred(tmp_path: Path) -> None:
    """silero's VAD: an If on the input's shape, whose other branch is not even valid at
    the shapes the manifest gives (here a MatMul of [2, 8] by [4, 1])."""
    rng = np.random.default_rng(6)
    valid = _branch("valid", [helper.make_node("MatMul", ["x", "w8"], ["a"], name="good")],
                    "a", [2, 1], {"w8": rng.standard_normal((8, 1)).astype(np.float32)})
    broken = _branch("broken", [helper.make_node("MatMul", ["x", "w4"], ["b"], name="bad")],
                     "b", [2, 1], {"w4": rng.standard_normal((4, 1)).astype(np.float32)})
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "last"], ["width"], name="width"),
        helper.make_node("Equal", ["width", "eight"], ["wide"], name="is_wide"),
        helper.make_node("If", ["wide"], ["y"], name="by_width", then_branch=valid,
                         else_branch=broken),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F32, ["N", "W"])],
        [helper.make_tensor_value_info("y", F32, ["N", 1])],
        {"last": np.array(1, np.int64), "eight": np.array(8, np.int64)},
    )
    graph = import_model(save(model, tmp_path), {"x": (2, 8)}).graph
    names = {node.name: node.op for node in graph.nodes}
    assert names["by_width/then/good"] == "MatMul"
    assert not any(name.startswith("by_width/else/") for name in names)
    assert "Where" not in names.values()


def test_a_run_time_branch_invalid_at_these_shapes_says_why(tmp_path: Path) -> None:
    """silero's VAD at 16 kHz shapes: its 8 kHz branch, picked by the `sr` input at run
    time, is compiled too and is not valid at them. The error says where it came from."""
    rng = np.random.default_rng(7)
    valid = _branch("valid", [helper.make_node("MatMul", ["x", "w8"], ["a"], name="good")],
                    "a", [2, 1], {"w8": rng.standard_normal((8, 1)).astype(np.float32)})
    broken = _branch("broken", [helper.make_node("MatMul", ["x", "w4"], ["b"], name="bad")],
                     "b", [2, 1], {"w4": rng.standard_normal((4, 1)).astype(np.float32)})
    model = make_model(
        [helper.make_node("Equal", ["sr", "rate"], ["is_16k"], name="rate_check"),
         helper.make_node("If", ["is_16k"], ["y"], name="by_rate", then_branch=valid,
                          else_branch=broken)],
        [helper.make_tensor_value_info("x", F32, [2, 8]),
         helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", F32, [2, 1])],
        {"rate": np.array(16000, np.int64)},
    )
    with pytest.raises(BuildgenError) as caught:
        import_model(save(model, tmp_path), {})
    (diagnostic,) = caught.value.diagnostics
    assert "by_rate/else/bad" in diagnostic.message
    assert diagnostic.hint is not None
    assert "If 'by_rate', whose condition ('is_16k') is known only at run time" in diagnostic.hint


def test_an_inference_error_is_blamed_on_the_innermost_run_time_if_that_holds_the_node(
) -> None:
    """The node is found after ONNX's "node name: " by prefix, so a name holding ')' or
    ', ' (any character is allowed) still matches; an If's name that merely appears
    elsewhere in the message does not."""
    from buildgen.importer.branches import Select, _branch_named_in

    outer = Select("gate (a)", "y", "c", "c/s", "t", "e")
    inner = Select("gate (a)/then/inner", "z", "d", "d/s", "t2", "e2")
    text = ("ONNX shape inference failed: [ShapeInferenceError] (op_type:Reshape, node "
            "name: gate (a)/then/inner/else/r, 1): Target shape mismatch near gate (a)")
    assert _branch_named_in(text, [outer, inner]) is inner
    assert _branch_named_in(text, [outer]) is outer
    unrelated = "(op_type:Reshape, node name: reshape_gate (a)/then/x): mismatch"
    assert _branch_named_in(unrelated, [outer, inner]) is None
