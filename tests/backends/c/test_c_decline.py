"""decline_reason: None for what the c backend runs, a precise reason for the rest."""

from __future__ import annotations

import numpy as np
import pytest
from c_ir import F32, I64, ir_graph, ir_node, one_region

from buildgen.backends.c import CBackend
from buildgen.errors import BuildgenError

BACKEND = CBackend()


def _reason(
    op: str,
    types: dict,
    inputs: list[str],
    outputs: list[str],
    weights: tuple[str, ...] = (),
    domain: str = "",
    **attrs: object,
) -> str | None:
    node = ir_node(op, inputs, outputs, domain, **attrs)
    runtime = [t for t in inputs if t and t not in weights]
    graph = ir_graph([node], types, runtime, outputs, weights)
    return BACKEND.decline_reason(node, graph)


X4 = {"x": (F32, (1, 3, 8, 8)), "w": (F32, (4, 3, 3, 3)), "y": (F32, (1, 4, 6, 6))}


def test_supported_nodes_have_no_reason() -> None:
    assert _reason("Conv", X4, ["x", "w"], ["y"], ("w",)) is None
    assert _reason("Relu", {"x": (F32, (3,)), "y": (F32, (3,))}, ["x"], ["y"]) is None
    # Reshape never reads its shape at run time, so a computed shape is fine
    types = {"x": (F32, (2, 3)), "s": (I64, (1,)), "y": (F32, (6,))}
    assert _reason("Reshape", types, ["x", "s"], ["y"]) is None


def test_empty_tensors() -> None:
    """A node that writes only empty tensors runs (as nothing), whatever its op; one that
    makes something of empty inputs runs if its op handles that."""
    empty = {"x": (F32, (0, 4)), "z": (F32, (1, 4)), "y": (F32, (0, 4))}
    assert _reason("Add", empty, ["x", "z"], ["y"]) is None
    mm = {"a": (F32, (0, 5)), "b": (F32, (5, 3)), "y": (F32, (0, 3))}
    assert _reason("MatMul", mm, ["a", "b"], ["y"]) is None
    reduce = {"x": (F32, (2, 0, 4)), "a": (I64, (1,)), "y": (F32, (2, 1, 4))}
    assert _reason("ReduceSum", reduce, ["x", "a"], ["y"], ("a",)) is None
    concat = {"x": (F32, (2, 0)), "z": (F32, (2, 3)), "y": (F32, (2, 3))}
    assert _reason("Concat", concat, ["x", "z"], ["y"], axis=1) is None
    assert _reason("ArgMax", {"x": (F32, (2, 0)), "y": (I64, (2, 1))}, ["x"], ["y"], axis=1) == (
        "zero-size tensor 'x' not supported by ArgMax"
    )


def test_batchnorm_statistics_outputs_need_opset_14() -> None:
    types = {k: (F32, (3,)) for k in "sbmvr"} | {"x": (F32, (2, 3)), "y": (F32, (2, 3))}
    node = ir_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "r"])
    for opset, expected in (
        (9, "BatchNormalization with statistics outputs before opset 14 not supported"),
        (15, "BatchNormalization with statistics outputs outside training mode not supported"),
    ):
        graph = ir_graph([node], types, ["x"], ["y", "r"], tuple("sbmv"), opset=opset)
        assert BACKEND.decline_reason(node, graph) == expected
    training = ir_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "r"], training_mode=1)
    graph = ir_graph([training], types, ["x"], ["y", "r"], tuple("sbmv"), opset=15)
    assert BACKEND.decline_reason(training, graph) is None


@pytest.mark.parametrize(
    ("op", "types", "inputs", "outputs", "weights", "attrs", "expected"),
    [
        (
            "NonMaxSuppression",
            {"b": (F32, (1, 4, 4)), "s": (F32, (1, 1, 4)), "y": (I64, (2, 3))},
            ["b", "s"],
            ["y"],
            (),
            {},
            "op NonMaxSuppression not implemented",
        ),
        (
            "Conv",
            {"x": (F32, (1, 2, 4, 4, 4, 4)), "w": (F32, (2, 2, 3, 3, 3, 3)),
             "y": (F32, (1, 2, 2, 2, 2, 2))},
            ["x", "w"],
            ["y"],
            ("w",),
            {},
            "Conv with 4-D kernel not supported",
        ),
        (
            "Sigmoid",
            {"x": (I64, (3,)), "y": (I64, (3,))},
            ["x"],
            ["y"],
            (),
            {},
            "dtype int64 not supported by Sigmoid (float32 only)",
        ),
        (
            "Cast",
            {"x": (F32, (3,)), "y": (F32, (3,))},
            ["x"],
            ["y"],
            (),
            {"to": 10},
            "Cast to TensorProto data type 10 not supported",
        ),
        (
            "Gelu",
            {"x": (F32, (3,)), "y": (F32, (3,))},
            ["x"],
            ["y"],
            (),
            {"approximate": "fast"},
            "Gelu with approximate='fast' not supported",
        ),
        (
            "Slice",
            {"x": (F32, (4,)), "s": (I64, (1,)), "e": (I64, (1,)), "y": (F32, (2,))},
            ["x", "s", "e"],
            ["y"],
            ("e",),
            {},
            "Slice with a run-time 'starts' input not supported (must be a constant)",
        ),
        (
            "Pad",
            {"x": (F32, (4,)), "p": (I64, (2,)), "y": (F32, (6,))},
            ["x", "p"],
            ["y"],
            ("p",),
            {"mode": "symmetric"},
            "Pad with mode 'symmetric' not supported (constant, reflect, edge, wrap only)",
        ),
        (
            "MaxPool",
            {"x": (F32, (1, 1, 4, 4)), "y": (F32, (1, 1, 2, 2)), "i": (I64, (1, 1, 2, 2))},
            ["x"],
            ["y", "i"],
            (),
            {"kernel_shape": [2, 2]},
            "MaxPool with an Indices output not supported",
        ),
        (  # the graph says 4 columns (ONNX shape inference), the spec and onnxruntime 3
            "AveragePool",
            {"x": (F32, (1, 1, 6, 6)), "y": (F32, (1, 1, 3, 4))},
            ["x"],
            ["y"],
            (),
            {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 0, 1], "ceil_mode": 1},
            "AveragePool with ceil_mode whose last window starts in the end padding not "
            "supported (ONNX shape inference keeps that window; the spec drops it)",
        ),
        (
            "MaxPool",
            {"x": (F32, (1, 1, 2, 2, 2, 2)), "y": (F32, (1, 1, 1, 1, 1, 1))},
            ["x"],
            ["y"],
            (),
            {"kernel_shape": [2, 2, 2, 2]},
            "MaxPool with 4-D kernel not supported",
        ),
        (
            "BatchNormalization",
            {k: (F32, (3,)) for k in "sbmvr"} | {"x": (F32, (1, 3)), "y": (F32, (1, 3))},
            ["x", "s", "b", "m", "v"],
            ["y", "r"],
            tuple("sbmv"),
            {},
            "BatchNormalization with statistics outputs outside training mode not supported",
        ),
        (
            "LayerNormalization",
            {"x": (F32, (2, 4)), "s": (F32, (2,)), "y": (F32, (2, 4))},
            ["x", "s"],
            ["y"],
            ("s",),
            {},
            "LayerNormalization with scale/bias shape (2,) not supported",
        ),
        (
            "ReduceSum",
            {"x": (F32, (2, 4)), "a": (I64, (1,)), "y": (F32, (2, 1))},
            ["x", "a"],
            ["y"],
            (),
            {},
            "ReduceSum with a run-time 'axes' input not supported (must be a constant)",
        ),
        (  # an empty input, a non-empty output: only ops that say they handle that
            "MatMul",
            {"a": (F32, (2, 0)), "b": (F32, (0, 3)), "y": (F32, (2, 3))},
            ["a", "b"],
            ["y"],
            (),
            {},
            "zero-size tensor 'a' not supported by MatMul",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and v[0].isupper() and " " not in v else "",
)
def test_declined_with_a_precise_reason(
    op, types, inputs, outputs, weights, attrs, expected
) -> None:
    assert _reason(op, types, inputs, outputs, weights, **attrs) == expected


def test_other_domains_are_not_implemented() -> None:
    types = {"x": (F32, (3,)), "y": (F32, (3,))}
    assert _reason("FusedGemm", types, ["x"], ["y"], domain="com.microsoft") == (
        "op com.microsoft.FusedGemm not implemented"
    )


def test_generate_refuses_a_declined_node() -> None:
    node = ir_node("MaxUnpool", ["x", "k"], ["v"])
    types = {"x": (F32, (1, 1, 2)), "k": (I64, (1, 1, 2)), "v": (F32, (1, 1, 4))}
    graph = ir_graph([node], types, ["x", "k"], ["v"], ())
    with pytest.raises(
        BuildgenError,
        match="cannot run node 'MaxUnpool_v' of region r0: op MaxUnpool not implemented",
    ):
        BACKEND.generate("m", graph, one_region(graph), {})


def test_constant_values_needed_but_not_given() -> None:
    node = ir_node("Slice", ["x", "s", "e"], ["y"])
    types = {"x": (F32, (4,)), "s": (I64, (1,)), "e": (I64, (1,)), "y": (F32, (2,))}
    graph = ir_graph([node], types, ["x"], ["y"], ("s", "e"))
    with pytest.raises(BuildgenError, match="needs the values of weight 's'"):
        BACKEND.generate("m", graph, one_region(graph), {})
    weights = {"s": np.array([1], np.int64), "e": np.array([3], np.int64)}
    assert "k0_slice" in BACKEND.generate("m", graph, one_region(graph), {}, weights=weights).text


def test_model_name_must_be_a_c_identifier() -> None:
    node = ir_node("Relu", ["x"], ["y"])
    graph = ir_graph([node], {"x": (F32, (2,)), "y": (F32, (2,))}, ["x"], ["y"])
    with pytest.raises(BuildgenError, match="not a C identifier"):
        BACKEND.generate("my-model", graph, one_region(graph), {})
