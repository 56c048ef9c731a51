"""Models with LRN, Resize and Upsample for the onednn tests: which nodes oneDNN must run
and which must decline to the c host (by node name), built with the Builder of
tests/backends/openblas/cpulib_cases.py."""

from __future__ import annotations

import numpy as np
import onnx
from cpulib_cases import Builder, Case
from onnx import helper, numpy_helper


def _floats(b: Builder, name: str, values: list[float]) -> str:
    b.weights.append(numpy_helper.from_array(np.array(values, dtype=np.float32), name))
    return name


def int32s(b: Builder, name: str, values: list[int]) -> str:
    b.weights.append(numpy_helper.from_array(np.array(values, dtype=np.int32), name))
    return name


def resize_node(b: Builder, x: str, name: str, scales: list[float] | None = None,
            sizes: list[int] | None = None, **attrs: object) -> str:
    inputs = [x, ""]
    if scales is not None:
        inputs.append(_floats(b, f"{name}_scales", scales))
    else:
        assert sizes is not None
        inputs += ["", b.weights_int(f"{name}_sizes", sizes)]
    return b.node("Resize", inputs, name, **attrs)


def lrn_net() -> onnx.ModelProto:
    """AlexNet's Conv -> Relu -> LRN -> MaxPool, and an LRN on the input."""
    b = Builder("lrn_net")
    x = b.input("x", [1, 8, 9, 9])
    y = b.node("Conv", [x, b.weight("w", [8, 8, 3, 3])], "conv", pads=[1, 1, 1, 1])
    y = b.node("Relu", [y], "relu")
    y = b.node("LRN", [y], "lrn5", size=5, alpha=0.01, beta=0.75, bias=2.0)
    b.outputs.append(b.node("MaxPool", [y], "y", kernel_shape=[2, 2], strides=[2, 2]))
    b.outputs.append(b.node("LRN", [x], "lrn3", size=3))
    return b.model()


def resize_taken() -> onnx.ModelProto:
    """Variants oneDNN's resampling reproduces, 1-D to 3-D."""
    b = Builder("resize_taken")
    x = b.input("x", [1, 3, 5, 7])
    b.outputs.append(resize_node(b, x, "near_up2", scales=[1, 1, 2, 2]))
    b.outputs.append(resize_node(b, x, "lin_sizes", sizes=[1, 3, 8, 4], mode="linear"))
    b.outputs.append(resize_node(b, x, "lin_torch", scales=[1, 1, 3, 3], mode="linear",
                             coordinate_transformation_mode="pytorch_half_pixel"))
    b.outputs.append(resize_node(b, x, "near_asym", scales=[1, 1, 2, 3],
                             coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    b.outputs.append(resize_node(b, x, "near_down_ceil", sizes=[1, 3, 5, 3],
                             nearest_mode="round_prefer_ceil"))
    v = b.input("v", [1, 2, 3, 4, 5])
    b.outputs.append(resize_node(b, v, "lin_3d", scales=[1, 1, 2, 2, 2], mode="linear"))
    s = b.input("s", [1, 4, 6])
    b.outputs.append(resize_node(b, s, "near_1d", sizes=[1, 4, 12]))
    # Inside a region: Conv -> Resize -> Conv, the resampled tensor stays channels-last.
    y = b.node("Conv", [x, b.weight("w1", [4, 3, 3, 3])], "c1", pads=[1, 1, 1, 1])
    y = resize_node(b, y, "mid", scales=[1, 1, 2, 2], mode="linear")
    b.outputs.append(b.node("Conv", [y, b.weight("w2", [2, 4, 1, 1])], "c2"))
    return b.model()


def resize_declined() -> onnx.ModelProto:
    """Variants whose sampling oneDNN cannot reproduce: the c host runs them."""
    b = Builder("resize_declined")
    x = b.input("x", [1, 3, 6, 8])
    b.outputs.append(resize_node(b, x, "align", scales=[1, 1, 2, 2], mode="linear",
                             coordinate_transformation_mode="align_corners"))
    b.outputs.append(resize_node(b, x, "near_down_floor", sizes=[1, 3, 3, 4]))
    b.outputs.append(resize_node(b, x, "lin_asym", scales=[1, 1, 2, 2], mode="linear",
                             coordinate_transformation_mode="asymmetric"))
    b.outputs.append(resize_node(b, x, "cubic", scales=[1, 1, 2, 2], mode="cubic"))
    b.outputs.append(resize_node(b, x, "channels", sizes=[1, 6, 6, 8]))
    # 6 * 1.3 -> 7 rows: ONNX samples at (j + 0.5) / 1.3, oneDNN at (j + 0.5) * 6 / 7.
    b.outputs.append(resize_node(b, x, "frac", scales=[1, 1, 1.3, 1.3], mode="linear"))
    return b.model()


def upsample9() -> onnx.ModelProto:
    """Upsample-9 (asymmetric): nearest by integer factors matches oneDNN, linear does not."""
    b = Builder("upsample9", opset=9)
    x = b.input("x", [1, 2, 4, 5])
    b.outputs.append(b.node("Upsample", [x, _floats(b, "s2", [1, 1, 2, 3])], "near"))
    b.outputs.append(b.node("Upsample", [x, _floats(b, "s2l", [1, 1, 2, 2])], "lin",
                            mode="linear"))
    return b.model()


def resize_sweep() -> onnx.ModelProto:
    """Every mode, coordinate mode and nearest mode over sizes that tie, round and clamp
    differently; decline_reason decides which oneDNN runs (checked against onnxruntime)."""
    b = Builder("resize_sweep")
    x = b.input("x", [1, 2, 6, 7])
    count = 0
    for mode, nearest_modes in (("nearest", ("round_prefer_floor", "round_prefer_ceil",
                                             "floor", "ceil")), ("linear", ("floor",))):
        for coords in ("half_pixel", "pytorch_half_pixel", "half_pixel_symmetric", "asymmetric"):
            for nearest in nearest_modes:
                for sizes in ([1, 2, 12, 14], [1, 2, 3, 7], [1, 2, 4, 5], [1, 2, 18, 21],
                              [1, 2, 13, 1]):
                    count += 1
                    b.outputs.append(resize_node(
                        b, x, f"s{count}", sizes=sizes, mode=mode, nearest_mode=nearest,
                        coordinate_transformation_mode=coords))
                count += 1
                b.outputs.append(resize_node(
                    b, x, f"s{count}", scales=[1, 1, 0.5, 3], mode=mode, nearest_mode=nearest,
                    coordinate_transformation_mode=coords))
    return b.model()


def concat_net() -> onnx.ModelProto:
    """A fire module's branches into a Concat, DenseNet's BatchNormalization and Relu on a
    Concat the next Concat reads too (40 channels: not whole blocks of 16), steps after a
    MaxPool, a Concat of the inputs on the last axis, and one with a constant input."""
    b = Builder("concat_net")
    x = b.input("x", [1, 8, 9, 9])
    a = b.node("Relu", [b.node("Conv", [x, b.weight("wa", [16, 8, 1, 1])], "a_conv")], "a")
    c3 = b.node("Conv", [x, b.weight("wb", [16, 8, 3, 3])], "b_conv", pads=[1, 1, 1, 1])
    c = b.node("Concat", [a, b.node("Relu", [c3], "b")], "c", axis=1)
    d = b.node("Relu", [b.batch_norm(c, 32, "d_bn")], "d")
    e = b.node("Conv", [d, b.weight("we", [8, 32, 3, 3])], "e", pads=[1, 1, 1, 1])
    f = b.node("Concat", [c, e], "f", axis=1)
    g = b.node("MaxPool", [f], "g_pool", kernel_shape=[2, 2], strides=[2, 2])
    b.outputs.append(b.node("Relu", [b.batch_norm(g, 40, "g_bn")], "g"))
    v = b.input("v", [1, 8, 9, 4])
    b.outputs.append(b.node("Concat", [x, v], "cat_w", axis=-1))
    b.outputs.append(b.node("Concat", [x, b.weight("k", [1, 2, 9, 9])], "cat_const", axis=1))
    return b.model()


def _shuffle(b: Builder, x: str, split: list[int], perm: list[int], back: list[int],
             name: str) -> str:
    y = b.node("Reshape", [x, b.weights_int(f"{name}_split", split)], f"{name}_r1")
    y = b.node("Transpose", [y], f"{name}_t", perm=perm)
    return b.node("Reshape", [y, b.weights_int(f"{name}_back", back)], f"{name}_r2")


def shuffle_net() -> onnx.ModelProto:
    """ShuffleNet's unit: a grouped 1x1 Conv, a channel shuffle into its 3 groups, a
    depthwise Conv; a shuffle of the model's input; and one written over flattened spatial
    dims, which is left to the host."""
    b = Builder("shuffle_net")
    x = b.input("x", [1, 12, 6, 6])
    y = b.node("Conv", [x, b.weight("w1", [12, 4, 1, 1])], "g1", group=3)
    y = b.node("Relu", [b.batch_norm(y, 12, "g1_bn")], "g1_relu")
    y = _shuffle(b, y, [1, 3, 4, 6, 6], [0, 2, 1, 3, 4], [1, 12, 6, 6], "s")
    b.outputs.append(b.node("Conv", [y, b.weight("w2", [12, 1, 3, 3])], "dw", group=12,
                            pads=[1, 1, 1, 1]))
    b.outputs.append(_shuffle(b, x, [1, 4, 3, 6, 6], [0, 2, 1, 3, 4], [1, 12, 6, 6], "in"))
    b.outputs.append(_shuffle(b, x, [1, 3, 4, 36], [0, 2, 1, 3], [1, 12, 6, 6], "flat"))
    return b.model()


def _silu(b: Builder, x: str, name: str) -> str:
    return b.node("Mul", [x, b.node("Sigmoid", [x], f"{name}_sig")], name)


def silu_residual() -> onnx.ModelProto:
    """YOLOv5's bottleneck, x + SiLU(Conv(SiLU(Conv(x)))), after a stem Conv: the residual
    Add follows a SiLU, whose input (read twice) is no chain. And a MatMul's erf GELU with
    a residual Add after it."""
    b = Builder("silu_residual")
    x = b.input("x", [1, 8, 7, 7])
    x = _silu(b, b.node("Conv", [x, b.weight("w0", [8, 8, 3, 3])], "c0", pads=[1, 1, 1, 1]),
              "s0")
    y = _silu(b, b.node("Conv", [x, b.weight("w1", [8, 8, 1, 1])], "c1"), "s1")
    y = _silu(b, b.node("Conv", [y, b.weight("w2", [8, 8, 3, 3])], "c2", pads=[1, 1, 1, 1]),
              "s2")
    b.outputs.append(b.node("Add", [x, y], "res"))
    t = b.input("t", [2, 5, 12])
    h = b.node("MatMul", [t, b.weight("wm", [12, 12])], "mm")
    erf = b.node("Erf", [b.node("Div", [h, _floats(b, "sqrt2", [2 ** 0.5])], "g_div")], "g_erf")
    g = b.node("Add", [erf, _floats(b, "one", [1.0])], "g_add")
    g = b.node("Mul", [b.node("Mul", [h, g], "g_mul"), _floats(b, "half", [0.5])], "g_half")
    b.outputs.append(b.node("Add", [g, t], "g_res"))
    return b.model()


def _split(b: Builder, x: str, sizes: list[int], names: list[str], axis: int) -> list[str]:
    b.nodes.append(helper.make_node("Split", [x, b.weights_int(f"{names[0]}_sizes", sizes)],
                                    names, name=f"/{names[0]}", axis=axis))
    return names


def c2f() -> onnx.ModelProto:
    """YOLOv8's C2f block: a Conv's output split in two halves, a bottleneck on the second,
    all three into a Concat and a 1x1 Conv, one region. A split into parts that cut a
    16-channel block, whose parts a Conv and the model read; and a split of the model's
    plain input on its last axis."""
    b = Builder("c2f")
    x = b.input("x", [1, 8, 10, 10])
    y = _silu(b, b.node("Conv", [x, b.weight("w0", [32, 8, 1, 1])], "c0"), "s0")
    half, rest = _split(b, y, [16, 16], ["half", "rest"], axis=1)
    z = _silu(b, b.node("Conv", [rest, b.weight("w1", [16, 16, 3, 3])], "c1", pads=[1, 1, 1, 1]),
              "s1")
    cat = b.node("Concat", [half, rest, z], "cat", axis=1)
    b.outputs.append(b.node("Conv", [cat, b.weight("w2", [8, 48, 1, 1])], "c2"))
    odd, wide = _split(b, y, [5, 27], ["odd", "wide"], axis=1)
    b.outputs.append(odd)
    b.outputs.append(b.node("Conv", [wide, b.weight("w3", [4, 27, 1, 1])], "c3"))
    v = b.input("v", [1, 6, 5, 7])
    b.outputs += _split(b, v, [2, 3, 2], ["v0", "v1", "v2"], axis=-1)
    return b.model()


def plain_pools() -> onnx.ModelProto:
    """Pools reading the model's plain inputs, which oneDNN pools with generic code: they
    read a blocked copy instead (bg_dnnl_make_pool). Channels not a whole block, 1-D to 3-D,
    a global max pool over a long row as magika's."""
    b = Builder("plain_pools")
    s = b.input("s", [1, 20, 300])
    b.outputs.append(b.node("GlobalMaxPool", [s], "gmax_1d"))
    x = b.input("x", [1, 5, 11, 11])
    b.outputs.append(b.node("MaxPool", [x], "max_2d", kernel_shape=[3, 3], strides=[2, 2]))
    b.outputs.append(b.node("AveragePool", [x], "avg_2d", kernel_shape=[2, 2], pads=[1, 1, 1, 1]))
    v = b.input("v", [1, 6, 4, 5, 6])
    b.outputs.append(b.node("GlobalAveragePool", [v], "gavg_3d"))
    return b.model()


def squeeze_excite() -> onnx.ModelProto:
    """PP-LCNet's squeeze-excite block as Paddle exports it (a Conv's bias as an Add, the
    mean over H and W as ReduceMean, the gate as HardSigmoid) and PP-OCR's FPN after it:
    x + x * s, plus an upsampled coarser level. All one oneDNN region; a ReduceMean over
    the channels, and one dropping its dims, stay on the host."""
    b = Builder("squeeze_excite", opset=11)
    x = b.input("x", [1, 8, 10, 10])
    y = b.node("Conv", [x, b.weight("w0", [16, 8, 3, 3])], "c0", pads=[1, 1, 1, 1])
    y = b.node("Add", [y, b.weight("b0", [1, 16, 1, 1])], "c0_bias")
    m = b.node("ReduceMean", [y], "se_mean", axes=[2, 3], keepdims=1)
    s = b.node("Relu", [b.node("Conv", [m, b.weight("w1", [4, 16, 1, 1])], "se_c1")], "se_r")
    s = b.node("HardSigmoid", [b.node("Conv", [s, b.weight("w2", [16, 4, 1, 1])], "se_c2")],
               "se_gate", alpha=0.2, beta=0.5)
    scaled = b.node("Mul", [y, s], "se_scale")
    z = b.node("Add", [y, scaled], "se_res")
    coarse = b.node("Conv", [y, b.weight("w3", [16, 16, 3, 3])], "down", pads=[1, 1, 1, 1],
                    strides=[2, 2])
    up = b.node("Resize", [coarse, _floats(b, "up_roi", []), _floats(b, "up_scales", [1, 1, 2, 2])],
                "up")
    f = b.node("Add", [z, up], "fpn_add")
    b.outputs.append(b.node("Conv", [f, b.weight("w4", [8, 16, 1, 1])], "out"))
    b.outputs.append(b.node("ReduceMean", [y], "mean_c", axes=[1], keepdims=1))
    b.outputs.append(b.node("ReduceMean", [y], "mean_flat", axes=[2, 3], keepdims=0))
    t = b.input("t", [1, 6, 16])  # a written-out LayerNorm's mean over the last axis
    b.outputs.append(b.node("ReduceMean", [t], "mean_1d", axes=[-1], keepdims=1))
    return b.model()


SWEEP = Case("resize_sweep", resize_sweep, {"x": (1, 2, 6, 7)}, ("Resize",))
# (case, nodes oneDNN runs, nodes the c host runs); node names are "/<output>".
IMAGE_CASES = (
    (Case("lrn_net", lrn_net, {"x": (1, 8, 9, 9)}, ("LRN", "Conv", "MaxPool")),
     ("/lrn5", "/lrn3"), ()),
    (Case("resize_taken", resize_taken,
          {"x": (1, 3, 5, 7), "v": (1, 2, 3, 4, 5), "s": (1, 4, 6)}, ("Resize",)),
     ("/near_up2", "/lin_sizes", "/lin_torch", "/near_asym", "/near_down_ceil", "/lin_3d",
      "/near_1d", "/mid"), ()),
    (Case("resize_declined", resize_declined, {"x": (1, 3, 6, 8)}, ()),
     (), ("/align", "/near_down_floor", "/lin_asym", "/cubic", "/channels", "/frac")),
    (Case("upsample9", upsample9, {"x": (1, 2, 4, 5)}, ("Upsample",)), ("/near",), ("/lin",)),
    (Case("concat_net", concat_net, {"x": (1, 8, 9, 9), "v": (1, 8, 9, 4)}, ("Concat",)),
     ("/c", "/d_bn", "/d", "/f", "/g_pool", "/g_bn", "/g", "/cat_w"), ("/cat_const",)),
    (Case("silu_residual", silu_residual, {"x": (1, 8, 7, 7), "t": (2, 5, 12)}, ("Conv",)),
     ("/c0", "/s0", "/c1", "/s1", "/c2", "/s2", "/res", "/mm", "/g_div", "/g_half", "/g_res"),
     ()),
    (Case("c2f", c2f, {"x": (1, 8, 10, 10), "v": (1, 6, 5, 7)}, ("Split",)),
     ("/c0", "/s0", "/half", "/c1", "/s1", "/cat", "/c2", "/odd", "/c3", "/v0"), ()),
    (Case("plain_pools", plain_pools, {"s": (1, 20, 300), "x": (1, 5, 11, 11),
                                       "v": (1, 6, 4, 5, 6)}, ("GlobalMaxPool",)),
     ("/gmax_1d", "/max_2d", "/avg_2d", "/gavg_3d"), ()),
    (Case("squeeze_excite", squeeze_excite, {"x": (1, 8, 10, 10), "t": (1, 6, 16)},
          ("ReduceMean",)),
     ("/c0", "/c0_bias", "/se_mean", "/se_c1", "/se_gate", "/se_scale", "/se_res", "/down",
      "/up", "/fpn_add", "/out"), ("/mean_c", "/mean_flat", "/mean_1d")),
    (Case("shuffle_net", shuffle_net, {"x": (1, 12, 6, 6)}, ("Conv",)),
     ("/g1", "/s_r1", "/s_t", "/s_r2", "/dw", "/in_r1", "/in_t", "/in_r2"),
     ("/flat_r1", "/flat_t", "/flat_r2")),
)


# ---- recurrent layers ----


def recurrent_node(b: Builder, op: str, x: str, name: str, hidden: int, size: int,
               inputs: tuple[str, ...] = (), outputs: int = 3, bias: bool = True,
               **attrs: object) -> list[str]:
    """An ONNX LSTM / GRU / RNN node with random constant W, R (and B); `inputs` are the
    optional inputs after B (sequence_lens, initial_h, ...). Returns its output names."""
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    count = 2 if attrs.get("direction") == "bidirectional" else 1
    w = b.weight(f"{name}_W", [count, gates * hidden, size], scale=0.5)
    r = b.weight(f"{name}_R", [count, gates * hidden, hidden], scale=0.5)
    bb = b.weight(f"{name}_B", [count, 2 * gates * hidden]) if bias else ""
    names = [f"{name}_Y", f"{name}_Yh", f"{name}_Yc"][: outputs if op == "LSTM" else 2]
    b.nodes.append(onnx.helper.make_node(op, [x, w, r, bb, *inputs], names, name=f"/{name}",
                                         hidden_size=hidden, **attrs))
    return names


def recurrent_taken() -> onnx.ModelProto:
    """LSTM, GRU (both kinds) and RNN variants oneDNN's cells run, forward, reverse and
    bidirectional, with run-time, constant and left-out initial states."""
    b = Builder("recurrent_taken")
    x = b.input("x", [5, 2, 4])
    h0, c0 = b.input("h0", [1, 2, 3]), b.input("c0", [1, 2, 3])
    b.outputs += recurrent_node(b, "LSTM", x, "lstm", 3, 4, ("", h0, c0))
    y, yh = recurrent_node(b, "LSTM", x, "bilstm", 3, 4, outputs=2, direction="bidirectional",
                       bias=False)
    b.outputs.append(y)
    # Y_h feeds a MatMul inside the region: a side output planned in the arena.
    b.outputs.append(b.node("MatMul", [yh, b.weight("proj", [3, 5])], "bilstm_proj"))
    b.outputs += recurrent_node(b, "GRU", x, "gru", 3, 4, ("", b.weight("gh0", [1, 2, 3])))
    b.outputs += recurrent_node(b, "GRU", x, "lbr", 3, 4, direction="bidirectional",
                            linear_before_reset=1)
    b.outputs += recurrent_node(b, "RNN", x, "rnn", 6, 4, direction="reverse")
    b.outputs += recurrent_node(b, "RNN", x, "relu_rnn", 3, 4, activations=["Relu"])
    lens = int32s(b, "lens", [5, 5])
    b.outputs += recurrent_node(b, "GRU", x, "full_lens", 3, 4, (lens,))
    return b.model()


def recurrent_declined() -> onnx.ModelProto:
    b = Builder("recurrent_declined")
    x = b.input("x", [5, 2, 4])
    b.outputs += recurrent_node(b, "LSTM", x, "clip", 3, 4, clip=0.5)
    b.outputs += recurrent_node(b, "GRU", x, "acts", 3, 4, activations=["HardSigmoid", "Tanh"])
    b.outputs += recurrent_node(b, "LSTM", x, "peep", 3, 4,
                            ("", "", "", b.weight("peep_P", [1, 9])))
    b.outputs += recurrent_node(b, "LSTM", x, "forget", 3, 4, input_forget=1)
    return b.model()


RECURRENT_CASES = (
    (Case("recurrent_taken", recurrent_taken, {"x": (5, 2, 4), "h0": (1, 2, 3),
                                               "c0": (1, 2, 3)}, ("LSTM", "GRU", "RNN")),
     ("/lstm", "/bilstm", "/bilstm_proj", "/gru", "/lbr", "/rnn", "/relu_rnn", "/full_lens"),
     ()),
    (Case("recurrent_declined", recurrent_declined, {"x": (5, 2, 4)}, ()),
     (), ("/clip", "/acts", "/peep", "/forget")),
)
