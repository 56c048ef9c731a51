"""Hand-built IR graphs for the serializer and verifier tests (no importer involved)."""

from __future__ import annotations

from buildgen.ir import DType, Graph, Node, TensorType, Value, Weight


def f32(*shape: int) -> TensorType:
    return TensorType(DType.FLOAT32, shape)


def small_graph() -> Graph:
    """x[2, 3] → MatMul(w) → Add(b) → Reshape(shape) → y[8] → Mask(flag) → z; every attr kind."""
    w = Weight("w", f32(3, 4), 0)
    b = Weight("b", f32(4), 64)
    shape = Weight("shape", TensorType(DType.INT64, (1,)), 128)
    flag = Weight("flag", TensorType(DType.BOOL, (3,)), 192)
    nodes = (
        Node("mm", "MatMul", ("x", "w"), ("h",)),
        Node("add", "Add", ("h", "b"), ("h2",), attrs=(("note", "π in UTF-8"),)),
        Node(
            "reshape",
            "Reshape",
            ("h2", "shape"),
            ("y",),
            attrs=(
                ("allowzero", 0),
                ("empty", ()),
                ("floats", (0.1, 1e-300, float("inf"), float("-inf"))),
                ("ints", (1, -2, 2**62)),
                ("nan", float("nan")),
                ("one", 1.0),
                ("strings", ("a", "b")),
            ),
        ),
        Node("custom", "Mask", ("y", "flag", ""), ("z",), domain="com.example"),
    )
    values = (
        Value("x", f32(2, 3)),
        Value("h", f32(2, 4)),
        Value("h2", f32(2, 4)),
        Value("y", f32(8)),
        Value("z", f32(8)),
    )
    return Graph(
        name="small",
        inputs=(values[0],),
        outputs=(values[3], values[4]),
        nodes=nodes,
        values=values,
        weights=(w, b, shape, flag),
        opset=17,
        source="models/small.onnx",
    )
