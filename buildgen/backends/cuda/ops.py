"""Launches of bg_cuda.cuh's generic kernels for the ops that are not elementwise.

Each function returns the statements of one node: filling the kernel's argument struct
with the node's shapes (constants here) and the launch on the instance's stream. `ptr`
names the tensor's local pointer in the region function.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from buildgen.backends.c.ops.common import float_attr, int_attr, ints_attr
from buildgen.backends.cuda.support import REDUCE_OPS, reduce_axes
from buildgen.errors import error
from buildgen.ir import Graph, Node

if TYPE_CHECKING:
    import numpy as np

Ptr = Callable[[str], str]
Weights = Mapping[str, "np.ndarray"] | None


def _struct(ctype: str, fields: list[tuple[str, object]]) -> list[str]:
    lines = [f"    {ctype} p = {{}};"]
    lines += [f"    p.{k} = {v};" for k, v in fields]
    return lines


def _dims(name: str, sizes: list[int], strides: list[int]) -> list[tuple[str, object]]:
    """Fields of a struct bg_dims `name` (a member of the argument struct; "" = the struct)."""
    at = f"{name}." if name else ""
    fields: list[tuple[str, object]] = [(f"{at}rank", len(sizes))]
    for d, (size, stride) in enumerate(zip(sizes, strides, strict=True)):
        fields += [(f"{at}size[{d}]", size), (f"{at}stride[{d}]", stride)]
    return fields


def _launch(kernel: str, grid: str, block: str, args: list[str]) -> list[str]:
    return [f"    {kernel}<<<{grid}, {block}, 0, stream>>>({', '.join(args)});"]


def _contiguous(shape: tuple[int, ...]) -> list[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return strides[::-1]


def _batch_strides(shape: tuple[int, ...], batch: tuple[int, ...]) -> list[int]:
    """Element strides of a matrix stack `shape` over the output's `batch` dims (0 where it
    broadcasts)."""
    own = shape[:-2]
    strides = _contiguous(shape)[:-2]
    out = []
    for d in range(len(batch)):
        k = d - (len(batch) - len(own))
        out.append(strides[k] if k >= 0 and own[k] != 1 else 0)
    return out


def gemm(node: Node, graph: Graph, ptr: Ptr, weights: Weights) -> list[str]:
    a, b = (graph.type_of(t).shape for t in node.inputs[:2])
    out = graph.type_of(node.outputs[0]).shape
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else ""
    if node.op == "Gemm":
        ta, tb = node.attr("transA", 0), node.attr("transB", 0)
        m, n = out
        k = a[0] if ta else a[1]
        sam, sak = (1, a[1]) if ta else (a[1], 1)
        sbk, sbn = (1, b[1]) if tb else (b[1], 1)
        batch: tuple[int, ...] = ()
        sa: list[int] = []
        sb: list[int] = []
        alpha = float_attr(node, "alpha", 1.0)
        beta = float_attr(node, "beta", 1.0)
    else:  # MatMul: 1-D operands are promoted (and their dim dropped from the output)
        a2 = (1, *a) if len(a) == 1 else a
        b2 = (*b, 1) if len(b) == 1 else b
        m, k, n = a2[-2], a2[-1], b2[-1]
        sam, sak, sbk, sbn = k, 1, n, 1
        batch = tuple(out[: len(out) - (2 - (len(a) == 1) - (len(b) == 1))])
        sa, sb = _batch_strides(a2, batch), _batch_strides(b2, batch)
        alpha, beta = 1.0, 0.0
    sbm_bias = sbn_bias = 0
    if bias:
        cs = (1,) * (2 - len(graph.type_of(bias).shape)) + graph.type_of(bias).shape
        sbm_bias, sbn_bias = (cs[1] if cs[0] != 1 else 0), (1 if cs[1] != 1 else 0)
    batches = math.prod(batch)
    fields: list[tuple[str, object]] = [
        ("m", m), ("n", n), ("k", k), ("sam", sam), ("sak", sak), ("sbk", sbk), ("sbn", sbn),
        *_dims("batch_a", list(batch), sa), *_dims("batch_b", list(batch), sb),
        ("batches", batches), ("alpha", f"{alpha!r}f"), ("beta", f"{beta!r}f"),
        ("sbm_bias", sbm_bias), ("sbn_bias", sbn_bias),
    ]
    grid = f"dim3({(n + 15) // 16}, {(m + 15) // 16}, {batches})"
    args = [ptr(node.inputs[0]), ptr(node.inputs[1]), ptr(bias) if bias else "NULL",
            ptr(node.outputs[0]), "p"]
    return [*_struct("struct bg_gemm_args", fields),
            *_launch("bg_gemm", grid, "dim3(BG_TILE, BG_TILE)", args)]


Window = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def _window(
    node: Node, spatial: tuple[int, ...], out: tuple[int, ...], kernel: tuple[int, ...]
) -> Window:
    """(strides, begin pads, dilations) of a 1-D/2-D window op, auto_pad resolved."""
    r = len(spatial)
    strides = ints_attr(node, "strides", (1,) * r)
    dilations = ints_attr(node, "dilations", (1,) * r)
    pads = ints_attr(node, "pads", (0,) * (2 * r))[:r]
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        total = [max(0, (o - 1) * s + (k - 1) * d + 1 - i)
                 for i, o, k, s, d in zip(spatial, out, kernel, strides, dilations, strict=True)]
        pads = tuple(t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total)
    elif auto == "VALID":
        pads = (0,) * r
    return strides, pads, dilations


def _as_2d(values: tuple[int, ...], fill: int) -> tuple[int, int]:
    return (fill, values[0]) if len(values) == 1 else (values[0], values[1])


def conv(node: Node, graph: Graph, ptr: Ptr, weights: Weights) -> list[str]:
    x = graph.type_of(node.inputs[0]).shape
    w = graph.type_of(node.inputs[1]).shape
    y = graph.type_of(node.outputs[0]).shape
    strides, pads, dil = _window(node, x[2:], y[2:], w[2:])
    h, wd = _as_2d(x[2:], 1)
    oh, ow = _as_2d(y[2:], 1)
    kh, kw = _as_2d(w[2:], 1)
    (sh, sw), (ph, pw), (dh, dw) = _as_2d(strides, 1), _as_2d(pads, 0), _as_2d(dil, 1)
    fields: list[tuple[str, object]] = [
        ("n", x[0]), ("c", x[1]), ("h", h), ("w", wd), ("m", y[1]), ("oh", oh), ("ow", ow),
        ("kh", kh), ("kw", kw), ("group", node.attr("group", 1)), ("sh", sh), ("sw", sw),
        ("ph", ph), ("pw", pw), ("dh", dh), ("dw", dw),
    ]
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else ""
    args = [ptr(node.inputs[0]), ptr(node.inputs[1]), ptr(bias) if bias else "NULL",
            ptr(node.outputs[0]), "p"]
    n = math.prod(y)
    return [*_struct("struct bg_conv_args", fields),
            *_launch("bg_conv2d", f"bg_blocks({n})", "BG_THREADS", args)]


def pool(node: Node, graph: Graph, ptr: Ptr, weights: Weights) -> list[str]:
    x = graph.type_of(node.inputs[0]).shape
    y = graph.type_of(node.outputs[0]).shape
    kernel = ints_attr(node, "kernel_shape", ())
    strides, pads, dil = _window(node, x[2:], y[2:], kernel)
    h, wd = _as_2d(x[2:], 1)
    oh, ow = _as_2d(y[2:], 1)
    (kh, kw), (sh, sw) = _as_2d(kernel, 1), _as_2d(strides, 1)
    (ph, pw), (dh, dw) = _as_2d(pads, 0), _as_2d(dil, 1)
    fields: list[tuple[str, object]] = [
        ("planes", x[0] * x[1]), ("h", h), ("w", wd), ("oh", oh), ("ow", ow), ("kh", kh),
        ("kw", kw), ("sh", sh), ("sw", sw), ("ph", ph), ("pw", pw), ("dh", dh), ("dw", dw),
        ("is_max", int(node.op == "MaxPool")),
        ("count_include_pad", int_attr(node, "count_include_pad", 0)),
    ]
    args = [ptr(node.inputs[0]), ptr(node.outputs[0]), "p"]
    return [*_struct("struct bg_pool_args", fields),
            *_launch("bg_pool2d", f"bg_blocks({math.prod(y)})", "BG_THREADS", args)]


def _reduce_launch(node: Node, ptr: Ptr, outer: int, n: int, inner: int, op: int) -> list[str]:
    args = [ptr(node.inputs[0]), ptr(node.outputs[0]), str(outer), str(n), str(inner), str(op)]
    return _launch("bg_reduce", f"bg_blocks({outer * inner})", "BG_THREADS", args)


def global_pool(node: Node, graph: Graph, ptr: Ptr, weights: Weights) -> list[str]:
    x = graph.type_of(node.inputs[0]).shape
    op = 2 if node.op == "GlobalMaxPool" else 1
    return _reduce_launch(node, ptr, x[0] * x[1], math.prod(x[2:]), 1, op)


def reduce(node: Node, graph: Graph, ptr: Ptr, weights: Weights) -> list[str]:
    x = graph.type_of(node.inputs[0]).shape
    given = None
    if len(node.inputs) > 1 and node.inputs[1]:
        given = tuple(int(v) for v in _value(weights, node.inputs[1], node).reshape(-1))
    axes = reduce_axes(node, graph, given)
    if axes and list(axes) != list(range(axes[0], axes[-1] + 1)):
        # Reduced dims not next to each other: size-1 dims between them do not matter.
        kept = [d for d in range(axes[0], axes[-1] + 1) if d not in axes and x[d] != 1]
        if kept:
            raise error(f"cuda backend: {node.op} '{node.name}' over non-adjacent axes {axes}")
    lo, hi = (axes[0], axes[-1] + 1) if axes else (0, 0)
    outer, n, inner = math.prod(x[:lo]), math.prod(x[lo:hi]), math.prod(x[hi:])
    return _reduce_launch(node, ptr, outer, n, inner, REDUCE_OPS[node.op])


def softmax(node: Node, graph: Graph, ptr: Ptr, weights: Weights) -> list[str]:
    x = graph.type_of(node.inputs[0]).shape
    legacy = graph.opset < 13
    axis = int_attr(node, "axis", 1 if legacy else -1) % max(len(x), 1)
    outer, n = math.prod(x[:axis]), x[axis] if x else 1
    inner = math.prod(x[axis + 1:])
    if legacy:  # opset < 13 flattens to 2-D at the axis
        n, inner = math.prod(x[axis:]), 1
    args = [ptr(node.inputs[0]), ptr(node.outputs[0]), str(outer), str(n), str(inner),
            str(int(node.op == "LogSoftmax"))]
    return _launch("bg_softmax", f"bg_blocks({outer * inner})", "BG_THREADS", args)


def layer_norm(node: Node, graph: Graph, ptr: Ptr, weights: Weights) -> list[str]:
    x = graph.type_of(node.inputs[0]).shape
    axis = int_attr(node, "axis", -1) % len(x)
    rows, n = math.prod(x[:axis]), math.prod(x[axis:])
    eps = float_attr(node, "epsilon", 1e-5)
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else ""
    args = [ptr(node.inputs[0]), ptr(node.inputs[1]), ptr(bias) if bias else "NULL",
            ptr(node.outputs[0]), str(rows), str(n), f"{eps!r}f"]
    return _launch("bg_layer_norm", f"{min(rows, 65535)}", "BG_THREADS", args)


def _strided(node: Node, ptr: Ptr, out: tuple[int, ...], offset: int,
             strides: list[int]) -> list[str]:
    fields = _dims("", list(out), strides)
    n = math.prod(out)
    args = [ptr(node.inputs[0]), ptr(node.outputs[0]), str(n), str(offset), "d"]
    lines = ["    struct bg_dims d = {};", *(f"    d.{k} = {v};" for k, v in fields)]
    return [*lines, *_launch("bg_strided_copy", f"bg_blocks({n})", "BG_THREADS", args)]


def transpose(node: Node, graph: Graph, ptr: Ptr, weights: Weights) -> list[str]:
    x = graph.type_of(node.inputs[0]).shape
    perm = ints_attr(node, "perm", tuple(reversed(range(len(x)))))
    strides = _contiguous(x)
    return _strided(node, ptr, tuple(x[p] for p in perm), 0, [strides[p] for p in perm])


def slice_(node: Node, graph: Graph, ptr: Ptr, weights: Weights) -> list[str]:
    x = graph.type_of(node.inputs[0]).shape
    out = graph.type_of(node.outputs[0]).shape

    def values(i: int, default: list[int]) -> list[int]:
        if len(node.inputs) > i and node.inputs[i]:
            return [int(v) for v in _value(weights, node.inputs[i], node).reshape(-1)]
        return default

    starts, ends = values(1, []), values(2, [])
    axes = [a % len(x) for a in values(3, list(range(len(starts))))]
    steps = values(4, [1] * len(starts))
    strides = _contiguous(x)
    offset, out_strides = 0, list(strides)
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        first, _, _ = slice(start, end, step).indices(x[axis])
        offset += first * strides[axis]
        out_strides[axis] = step * strides[axis]
    return _strided(node, ptr, out, offset, out_strides)


def concat(node: Node, graph: Graph, ptr: Ptr, weights: Weights) -> list[str]:
    out = graph.type_of(node.outputs[0]).shape
    axis = int_attr(node, "axis", 0) % len(out)
    item = graph.type_of(node.outputs[0]).dtype.itemsize
    outer, inner = math.prod(out[:axis]), math.prod(out[axis + 1:]) * item
    lines, at = [], 0
    for t in (t for t in node.inputs if t):
        width = graph.type_of(t).shape[axis] * inner
        if width and outer:
            dst = f"(unsigned char *){ptr(node.outputs[0])} + {at}"
            lines.append(f"    err = cudaMemcpy2DAsync({dst}, {out[axis] * inner}, {ptr(t)}, "
                         f"{width}, {width}, {outer}, cudaMemcpyDeviceToDevice, stream);")
            lines.append("    if (err != cudaSuccess) return bg_fail(env, \"cudaMemcpy2DAsync\", "
                         "where, err);")
        at += width
    return lines


def gather(node: Node, graph: Graph, ptr: Ptr, weights: Weights) -> list[str]:
    x = graph.type_of(node.inputs[0]).shape
    axis = int_attr(node, "axis", 0) % len(x)
    count = graph.type_of(node.inputs[1]).numel
    outer, inner = math.prod(x[:axis]), math.prod(x[axis + 1:])
    n = outer * count * inner
    args = [ptr(node.inputs[0]), ptr(node.inputs[1]), ptr(node.outputs[0]), str(outer),
            str(x[axis]), str(count), str(inner)]
    return _launch("bg_gather", f"bg_blocks({n})", "BG_THREADS", args)


def _value(weights: Weights, name: str, node: Node) -> np.ndarray:
    if weights is None or name not in weights:
        raise error(f"cuda backend: node '{node.name}' needs the value of constant '{name}'")
    return weights[name]


LAUNCHERS: dict[str, Callable[[Node, Graph, Ptr, Weights], list[str]]] = {
    "Gemm": gemm, "MatMul": gemm, "Conv": conv, "MaxPool": pool, "AveragePool": pool,
    "GlobalAveragePool": global_pool, "GlobalMaxPool": global_pool,
    "Softmax": softmax, "LogSoftmax": softmax, "LayerNormalization": layer_norm,
    "Transpose": transpose, "Slice": slice_, "Concat": concat, "Gather": gather,
    **{op: reduce for op in REDUCE_OPS},
}
