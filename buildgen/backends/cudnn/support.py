"""What the cudnn backend runs: float32 1-D and 2-D Conv (grouped, dilated; constant weights
and bias) with the elementwise chain after it, 1-D and 2-D MaxPool/AveragePool and the global
pools, and Softmax/LogSoftmax on any axis; a 1-D window runs as a 2-D one of height 1.
Everything else declines, with the reason the partitioner reports. cuDNN's legacy
descriptors take one pad per axis, so windows padded unevenly (and pools whose ceil_mode
changes the output size) are left to other backends."""

from __future__ import annotations

from collections.abc import Callable

from buildgen.backends.cpu_common.geometry import Window, window
from buildgen.backends.cpu_common.groups import ChainRules
from buildgen.ir import DType, Graph, Node

POOLS = frozenset(("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"))
SOFTMAX = frozenset(("Softmax", "LogSoftmax"))
INT_MAX = 2**31 - 1  # cuDNN's descriptors take int dims


def _float_reason(node: Node, graph: Graph) -> str | None:
    for name in (*node.inputs[:1], *node.outputs[:1]):
        if name and graph.type_of(name).dtype != DType.FLOAT32:
            return f"{node.op} on {graph.type_of(name).dtype.value} (cudnn runs float32 here)"
    return None


def _shape(graph: Graph, name: str) -> tuple[int, ...]:
    return graph.type_of(name).shape


def _extra_outputs_reason(node: Node, graph: Graph) -> str | None:
    for name in node.outputs[1:]:
        if name and (graph.consumers(name) or name in graph.output_names):
            return f"{node.op} with its output '{name}' used"
    return None


def node_window(node: Node, graph: Graph) -> Window:
    """The node's window over its spatial dims (Global pools: all of them)."""
    x, y = _shape(graph, node.inputs[0]), _shape(graph, node.outputs[0])
    if node.op.startswith("Global"):
        ones, zeros = (1,) * (len(x) - 2), (0,) * (len(x) - 2)
        return Window(x[2:], y[2:], x[2:], ones, ones, zeros, zeros)
    if node.op == "Conv":
        kernel = _shape(graph, node.inputs[1])[2:]
    else:
        shape = node.attr("kernel_shape")
        assert isinstance(shape, tuple)
        kernel = tuple(int(k) for k in shape)
    return window(node, x, y, kernel)


def planar(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A 1-D window's NCW shape as cuDNN's NCHW with H = 1; NCHW as it is."""
    return (*shape[:2], 1, *shape[2:]) if len(shape) == 3 else shape


def planar_window(geo: Window) -> Window:
    """A 1-D window as a 2-D one of height 1 (no padding, stride or dilation along it)."""
    if geo.rank == 2:
        return geo
    one, zero = (1,), (0,)
    return Window(one + geo.size, one + geo.out, one + geo.kernel, one + geo.strides,
                  one + geo.dilations, zero + geo.pads_begin, zero + geo.pads_end)


def _window_reason(node: Node, graph: Graph) -> str | None:
    x = _shape(graph, node.inputs[0])
    if len(x) not in (3, 4):
        return f"{node.op} of rank {len(x)} (cudnn runs 1-D and 2-D windows: NCW, NCHW)"
    if any(d == 0 for d in (*x, *_shape(graph, node.outputs[0]))):
        return f"{node.op} of an empty tensor"
    if any(d > INT_MAX for d in x):
        return f"{node.op} with a dim over 2^31"
    geo = node_window(node, graph)
    if geo.pads_begin != geo.pads_end:
        return (f"{node.op} padded unevenly ({list(geo.pads_begin)} then {list(geo.pads_end)}; "
                "cuDNN pads both sides alike)")
    for n, o, k, s, d, p in zip(geo.size, geo.out, geo.kernel, geo.strides, geo.dilations,
                                geo.pads_begin, strict=True):
        if (n + 2 * p - (k - 1) * d - 1) // s + 1 != o:
            return f"{node.op} whose output size needs ceil_mode (cuDNN rounds down)"
    return None


def _conv(node: Node, graph: Graph) -> str | None:
    for index, what in ((1, "weights"), (2, "bias")):
        name = node.inputs[index] if index < len(node.inputs) else ""
        if name and not graph.is_weight(name):
            return f"Conv with run-time {what} (cudnn folds constant weights at codegen)"
    return _window_reason(node, graph)


def _pool(node: Node, graph: Graph) -> str | None:
    if node.op == "MaxPool" and node.attr("storage_order", 0) != 0:
        return "MaxPool with storage_order=1"
    if any(d != 1 for d in node_window(node, graph).dilations):
        return f"{node.op} with dilations (cuDNN pools are dense)"
    return _extra_outputs_reason(node, graph) or _window_reason(node, graph)


def softmax_view(node: Node, graph: Graph) -> tuple[int, int, int]:
    """(outer, axis extent, inner): Softmax-13 normalizes along one axis, which cuDNN's
    channel mode does on an [outer, axis, inner, 1] view; Softmax-1/11 flattens to 2-D."""
    shape = _shape(graph, node.inputs[0])
    rank = max(len(shape), 1)
    default = -1 if graph.opset >= 13 else 1
    axis = node.attr("axis", default)
    assert isinstance(axis, int)
    axis %= rank
    outer = 1
    for d in shape[:axis]:
        outer *= d
    if graph.opset < 13:
        rest = 1
        for d in shape[axis:]:
            rest *= d
        return outer, rest, 1
    inner = 1
    for d in shape[axis + 1 :]:
        inner *= d
    return outer, shape[axis] if shape else 1, inner


def _softmax(node: Node, graph: Graph) -> str | None:
    if any(v > INT_MAX for v in softmax_view(node, graph)):
        return f"{node.op} with a view dim over 2^31"
    if graph.type_of(node.inputs[0]).numel == 0:
        return f"{node.op} of an empty tensor"
    return None


_CHECKS: dict[str, Callable[[Node, Graph], str | None]] = {
    "Conv": _conv,
    **{op: _pool for op in POOLS},
    **{op: _softmax for op in SOFTMAX},
}


def anchor_reason(node: Node, graph: Graph) -> str | None:
    if node.domain not in ("", "ai.onnx"):
        return f"op {node.domain}.{node.op} is not supported by cudnn"
    check = _CHECKS.get(node.op)
    if check is None:
        return f"no cudnn pattern covers {node.op}"
    return _float_reason(node, graph) or check(node, graph)


RULES = ChainRules(
    kind="cudnn",
    anchors=frozenset(_CHECKS),
    fusable=frozenset(("Conv",)),
    anchor_reason=anchor_reason,
)
