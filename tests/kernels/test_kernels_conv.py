"""bg_conv2d against onnxruntime's Conv: the implicit-im2col GEMM path (groups, strides,
dilations, asymmetric pads, K crossing a KC slice), the shifted form of convolutions with
packed filters (bands of output rows, phase planes for strides), the 1x1 fast path, and the
direct path for one input channel per group and few filters (depthwise, depth multipliers);
one input channel into many filters (a single-channel image, an STFT) is a GEMM."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from bgk_reference import (
    ACT_CLIP,
    ACT_HARDSWISH,
    ACT_NONE,
    ACT_RELU,
    ACT_TANH,
    apply_act,
    conv_out,
    run_one_node,
)
from conftest import Epilogue, Kernels

from buildgen.backends.c.workspace import (
    NARROW,
    SPLIT,
    WIDE,
    conv2d_is_channels_last,
    conv2d_is_direct,
    conv2d_is_pixel,
    conv2d_is_transposed,
    conv2d_shifted_bytes,
)


@dataclass(frozen=True)
class Conv:
    n: int
    c: int
    h: int
    w: int
    m: int
    k: tuple[int, int]
    group: int = 1
    stride: tuple[int, int] = (1, 1)
    dil: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right (ONNX order)
    act: int = ACT_NONE
    bias: bool = True

    def out_hw(self) -> tuple[int, int]:
        oh = conv_out(self.h, self.k[0], self.stride[0], self.dil[0], self.pads[0], self.pads[2])
        ow = conv_out(self.w, self.k[1], self.stride[1], self.dil[1], self.pads[1], self.pads[3])
        return oh, ow

    def params(self) -> list[int]:
        oh, ow = self.out_hw()
        return [
            self.n,
            self.c,
            self.h,
            self.w,
            self.m,
            oh,
            ow,
            *self.k,
            self.group,
            *self.stride,
            *self.dil,
            self.pads[0],
            self.pads[1],
        ]


CASES = {
    "3x3_pad1": Conv(1, 8, 12, 12, 16, (3, 3), pads=(1, 1, 1, 1), act=ACT_RELU),
    "batch2_no_bias": Conv(2, 5, 9, 11, 7, (3, 3), pads=(1, 1, 1, 1), bias=False),
    "asym_pads_stride_dil": Conv(
        1, 6, 13, 10, 9, (3, 2), stride=(2, 1), dil=(1, 2), pads=(0, 2, 1, 0)
    ),
    "groups2": Conv(1, 6, 10, 10, 4, (3, 3), group=2, pads=(1, 1, 1, 1), act=ACT_CLIP),
    "groups_mg1": Conv(1, 8, 9, 9, 4, (3, 3), group=4, pads=(1, 0, 1, 0)),
    "k_crosses_kc": Conv(1, 32, 20, 19, 40, (3, 3), pads=(1, 1, 1, 1), act=ACT_TANH),
    "stem_7x7_s2": Conv(1, 3, 30, 30, 8, (7, 7), stride=(2, 2), pads=(3, 3, 3, 3)),
    "5x5_stride3": Conv(1, 4, 17, 16, 5, (5, 5), stride=(3, 3), pads=(2, 1, 0, 2)),
    "single_output_pixel": Conv(2, 6, 3, 3, 10, (3, 3)),
    "pointwise": Conv(2, 16, 7, 9, 24, (1, 1), act=ACT_RELU),
    "pointwise_groups": Conv(1, 12, 5, 6, 8, (1, 1), group=4),
    "pointwise_mg1": Conv(1, 12, 5, 6, 3, (1, 1), group=3),
    "pointwise_stride2": Conv(1, 16, 9, 9, 8, (1, 1), stride=(2, 2)),
    "pointwise_padded": Conv(1, 4, 5, 5, 6, (1, 1), pads=(1, 0, 0, 1)),
    "depthwise": Conv(1, 8, 14, 15, 8, (3, 3), group=8, pads=(1, 1, 1, 1), act=ACT_RELU),
    "depthwise_s2_dil2": Conv(
        2, 6, 15, 16, 6, (3, 3), group=6, stride=(2, 2), dil=(2, 2), pads=(2, 1, 2, 2)
    ),
    # Rows wide enough for the 4 x 8-lane interior loop, at stride 1 and 2.
    "depthwise_wide": Conv(1, 3, 5, 75, 3, (3, 3), group=3, pads=(1, 1, 1, 1), act=ACT_RELU),
    "depthwise_wide_s2_dil3": Conv(
        1, 2, 9, 90, 2, (3, 5), group=2, stride=(2, 2), dil=(1, 3), pads=(1, 2, 1, 3)
    ),
    "depth_multiplier2": Conv(1, 4, 9, 9, 8, (3, 3), group=4, pads=(0, 1, 1, 0)),
    # Row widths between whole vector steps: 17 (8 + 8 + an overlapping 8), 30 (24 + an
    # overlapping 8), 45 (32 + an overlapping 16), at stride 1 and 2.
    # PP-LCNet's blocks: HardSwish in the epilogue, in registers (bg__dw_block)
    "depthwise_hardswish": Conv(1, 8, 14, 40, 8, (3, 3), group=8, pads=(1, 1, 1, 1),
                                act=ACT_HARDSWISH),
    "depthwise_ow30": Conv(2, 3, 6, 30, 3, (3, 3), group=3, pads=(1, 1, 1, 1), act=ACT_CLIP),
    "depthwise_ow17_s2": Conv(1, 2, 7, 34, 2, (3, 3), group=2, stride=(2, 2), pads=(1, 1, 1, 1)),
    "depthwise_ow45": Conv(1, 2, 5, 45, 4, (3, 3), group=2, pads=(1, 1, 1, 1), act=ACT_TANH),
    # Rows narrower than a vector read the plane flat: 6x6 planes, a 1-D (k x 1) filter
    # down 300 rows, a band of rows wider than the flat buffer, dilation.
    "depthwise_narrow": Conv(2, 6, 6, 6, 6, (3, 3), group=6, pads=(1, 1, 1, 1), act=ACT_RELU),
    "depthwise_k_by_1": Conv(1, 4, 300, 1, 4, (5, 1), group=4, pads=(2, 0, 2, 0)),
    "depthwise_narrow_bands": Conv(1, 2, 700, 5, 2, (3, 3), group=2, dil=(2, 1),
                                   pads=(2, 1, 2, 1), act=ACT_CLIP),
    # Small planes run 8 channels at a time, channels last: strided (MobileNetV2's TF-style
    # pads, EfficientNet's 5x5), a last block of 4 and of 3 channels, dilation, a batch,
    # 3x3 planes at stride 1, strides 3 x 1.
    "depthwise_cl_s2": Conv(1, 20, 12, 12, 20, (3, 3), group=20, stride=(2, 2),
                            pads=(0, 0, 1, 1), act=ACT_CLIP),
    "depthwise_cl_5x5_s2": Conv(2, 11, 14, 14, 11, (5, 5), group=11, stride=(2, 2),
                                pads=(1, 1, 2, 2), act=ACT_TANH),
    "depthwise_cl_dilated": Conv(1, 8, 9, 9, 8, (3, 3), group=8, stride=(2, 2), dil=(2, 2),
                                 pads=(2, 2, 2, 2), bias=False),
    "depthwise_cl_3x3": Conv(1, 9, 3, 3, 9, (3, 3), group=9, pads=(1, 1, 1, 1),
                             act=ACT_RELU),
    "depthwise_cl_stride_3x1": Conv(1, 16, 10, 7, 16, (3, 3), group=16, stride=(3, 1),
                                    pads=(1, 1, 1, 1)),
    # Rows in equal steps of outputs: 14 as 7 + 7 (PP-LCNet's 5x5 layers), 13 as 7 then 6.
    "depthwise_cl_5x5_ow14": Conv(1, 16, 14, 14, 16, (5, 5), group=16, pads=(2, 2, 2, 2),
                                  act=ACT_HARDSWISH),
    "depthwise_cl_ow13": Conv(1, 12, 13, 13, 12, (3, 3), group=12, pads=(1, 1, 1, 1),
                              act=ACT_CLIP),
    # Larger planes, one plane at a time: vector rows (2 at once, and 4), strided vector
    # loads, the flat loop of narrow rows at stride 1, one output at a time at stride 3.
    "depthwise_plane_s2": Conv(1, 3, 60, 62, 3, (3, 3), group=3, stride=(2, 2),
                               pads=(1, 1, 1, 1), act=ACT_RELU),
    "depthwise_plane_ow30": Conv(1, 2, 40, 30, 2, (3, 3), group=2, pads=(1, 1, 1, 1),
                                 act=ACT_CLIP),
    "depthwise_plane_ow12": Conv(1, 2, 90, 12, 2, (3, 3), group=2, pads=(1, 1, 1, 1)),
    "depthwise_plane_flat": Conv(1, 2, 400, 5, 2, (3, 3), group=2, pads=(1, 1, 1, 1),
                                 act=ACT_TANH),
    "depthwise_plane_stride3": Conv(1, 2, 40, 60, 2, (3, 3), group=2, stride=(3, 3),
                                    pads=(1, 1, 1, 1)),
    # Strided stems, pixel by pixel with filters as vectors: 1 to 4 filter vectors, a last
    # vector of 4 and of 1 filters, TF-style and symmetric pads, 7x7, dilation, a batch,
    # tiles of several rows, rows longer than a 512-pixel tile, stride 2 x 1; 48 and 64
    # filters (the pixel form at 16 lanes, GEMM forms at 8).
    "pixel_stem_3x3": Conv(1, 3, 33, 35, 16, (3, 3), stride=(2, 2), pads=(1, 1, 1, 1),
                           act=ACT_CLIP),
    "pixel_stem_tf_pads": Conv(2, 3, 24, 24, 12, (3, 3), stride=(2, 2), pads=(0, 0, 1, 1),
                               act=ACT_RELU),
    "pixel_stem_7x7": Conv(1, 3, 40, 38, 25, (7, 7), stride=(2, 2), pads=(3, 3, 3, 3)),
    "pixel_stem_wide": Conv(1, 4, 9, 290, 32, (3, 5), stride=(2, 2), dil=(1, 2),
                            pads=(1, 4, 1, 4), act=ACT_TANH),
    "pixel_stem_2x1": Conv(1, 2, 12, 20, 8, (3, 3), stride=(2, 1), pads=(1, 1, 1, 1),
                           bias=False),
    "pixel_stem_long_rows": Conv(1, 3, 5, 1100, 8, (3, 3), stride=(2, 2), pads=(1, 1, 1, 1)),
    "pixel_stem_48_filters": Conv(1, 3, 30, 44, 48, (7, 7), stride=(2, 2), pads=(3, 3, 3, 3),
                                  act=ACT_RELU),
    "pixel_stem_64_filters": Conv(1, 3, 50, 70, 64, (5, 5), stride=(2, 2), pads=(2, 2, 2, 2),
                                  act=ACT_TANH),
    # Strided, up to 32 filters from more channels: the pixel form with 8-lane registers
    # (AVX2), GEMM forms with split vectors and at 16 lanes; two filter vectors, a ragged
    # last one, padding on every side, and enough channels for several K slices of a GEMM.
    "pixel_channels_16": Conv(1, 16, 41, 37, 16, (3, 3), stride=(2, 2), pads=(1, 1, 1, 1),
                              act=ACT_RELU),
    "pixel_channels_300": Conv(1, 300, 15, 19, 27, (3, 3), stride=(2, 2), pads=(1, 0, 1, 2)),
    "single_channel_image": Conv(1, 1, 16, 17, 8, (5, 5), pads=(2, 2, 2, 2), act=ACT_CLIP),
    "depth_multiplier7": Conv(1, 2, 6, 11, 14, (3, 3), group=2, pads=(1, 1, 1, 1)),
    # an STFT as silero-vad writes it: one channel, 64 filters of 1 x 256 at stride 128
    "stft_as_conv": Conv(2, 1, 1, 832, 64, (1, 256), stride=(1, 128)),
    # Stride 1 with packed filters takes the shifted form (bg_conv.h): two bands of rows,
    # a row-edge tile (M = 62), dilation with asymmetric pads, groups, a batch.
    "shifted_two_bands": Conv(1, 8, 30, 33, 62, (3, 3), pads=(1, 1, 1, 1), act=ACT_RELU),
    "shifted_dilated": Conv(1, 12, 17, 19, 10, (3, 3), dil=(2, 1), pads=(2, 0, 1, 2)),
    "shifted_groups_batch": Conv(2, 16, 12, 14, 8, (3, 3), group=2, pads=(1, 1, 1, 1)),
    "shifted_5x5": Conv(1, 16, 20, 20, 16, (5, 5), pads=(2, 2, 2, 2), act=ACT_CLIP),
    # Strided: phase planes (2 x 2, 3 x 1), odd sizes, dilation, asymmetric pads (over 32
    # filters: with fewer, 8-lane registers take the pixel form).
    "shifted_stride2": Conv(1, 16, 29, 31, 40, (3, 3), stride=(2, 2), pads=(1, 1, 1, 1),
                            act=ACT_RELU),
    "shifted_stride3x1_dil": Conv(2, 12, 23, 17, 36, (3, 3), stride=(3, 1), dil=(2, 1),
                                  pads=(2, 0, 1, 2)),
    # Aligned (OW a multiple of the vector width): Y's own columns, each vector read from
    # its image row: a CNN's 16x16 stage; five bands with a row-edge tile (M = 100); a
    # ragged last tile of whole vectors (5 x 16 = 80 columns); phase planes; a batch.
    "shifted_aligned_16x16": Conv(1, 32, 16, 16, 32, (3, 3), pads=(1, 1, 1, 1), act=ACT_RELU),
    "shifted_aligned_bands": Conv(1, 8, 60, 32, 100, (3, 3), pads=(1, 1, 1, 1), act=ACT_CLIP),
    "shifted_aligned_ragged": Conv(2, 16, 5, 16, 16, (3, 3), pads=(1, 1, 1, 1)),
    "shifted_aligned_stride2": Conv(1, 16, 32, 32, 40, (3, 3), stride=(2, 2),
                                    pads=(1, 1, 1, 1), act=ACT_RELU),
}
SHIFTED = sorted(name for name in CASES if name.startswith("shifted"))
# Few output pixels, many filters: Y^T with the pixels on the tile's 4-row side (bg_conv.h).
TRANSPOSED = {
    "transposed_7x7_stage": Conv(1, 96, 7, 7, 96, (3, 3), pads=(1, 1, 1, 1), act=ACT_RELU),
    "transposed_1d_short": Conv(2, 29, 1, 4, 40, (1, 3), pads=(0, 1, 0, 1), act=ACT_TANH),
    "transposed_pointwise": Conv(1, 48, 5, 6, 70, (1, 1), act=ACT_CLIP),
    "transposed_groups": Conv(1, 32, 3, 3, 96, (3, 3), group=2, pads=(1, 1, 1, 1)),
    "transposed_stft": Conv(2, 1, 1, 832, 64, (1, 256), stride=(1, 128)),
}
CASES |= TRANSPOSED


def run_case(k: Kernels, case: Conv, misalign: int = 0, prepacked: bool = False) -> None:
    rng = np.random.default_rng(abs(hash(case)) % 2**32)
    x = rng.standard_normal((case.n, case.c, case.h, case.w)).astype(np.float32)
    wt = rng.standard_normal((case.m, case.c // case.group, *case.k)).astype(np.float32)
    bias = rng.standard_normal(case.m).astype(np.float32) if case.bias else None
    inputs = {"x": x, "w": wt} | ({"b": bias} if bias is not None else {})
    ref = run_one_node(
        "Conv",
        inputs,
        kernel_shape=list(case.k),
        group=case.group,
        strides=list(case.stride),
        dilations=list(case.dil),
        pads=list(case.pads),
    )
    ref = apply_act(ref, case.act, -0.5, 0.5)
    y = np.full(ref.shape, np.nan, np.float32)
    ep = None
    if bias is not None or case.act != ACT_NONE:
        ep = Epilogue(bias, 0, case.act, -0.5, 0.5)
    k.conv2d(case.params(), x, wt, ep, y, misalign, prepacked)
    kk = case.c // case.group * case.k[0] * case.k[1]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.sqrt(kk)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv2d(kernels_any: Kernels, name: str) -> None:
    run_case(kernels_any, CASES[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv2d_prepacked_filters(kernels_any: Kernels, name: str) -> None:
    """Filters packed once (as the generated create does) give the same results."""
    run_case(kernels_any, CASES[name], prepacked=True)


def test_conv2d_unaligned_workspace(kernels: Kernels) -> None:
    run_case(kernels, CASES["k_crosses_kc"], misalign=13)


def test_cnn_sized_layer(kernels: Kernels) -> None:
    """A layer of the size the product targets: several K slices, a ragged last N panel."""
    run_case(kernels, Conv(1, 64, 28, 28, 64, (3, 3), pads=(1, 1, 1, 1), act=ACT_RELU))
    run_case(kernels, Conv(1, 64, 28, 28, 64, (3, 3), pads=(1, 1, 1, 1), act=ACT_RELU),
             prepacked=True)


def _fields(case: Conv) -> dict[str, int]:
    names = ("N", "C", "H", "W", "M", "OH", "OW", "KH", "KW", "group", "stride_h", "stride_w",
             "dil_h", "dil_w", "pad_top", "pad_left")
    return dict(zip(names, case.params(), strict=True))


def _assert_prepacked_gives_packed_bits(kernels: Kernels, case: Conv) -> None:
    """bg_conv2d_prepacked (whichever form the case takes) against bg_conv2d with plain
    filters (always the packed form): the same bits."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((case.n, case.c, case.h, case.w)).astype(np.float32)
    wt = rng.standard_normal((case.m, case.c // case.group, *case.k)).astype(np.float32)
    ep = Epilogue(rng.standard_normal(case.m).astype(np.float32), 0, case.act, -0.5, 0.5)
    packed_form = np.full((case.n, case.m, *case.out_hw()), np.nan, np.float32)
    other_form = packed_form.copy()
    kernels.conv2d(case.params(), x, wt, ep, packed_form)
    kernels.conv2d(case.params(), x, wt, ep, other_form, prepacked=True)
    np.testing.assert_array_equal(other_form, packed_form)


@pytest.mark.parametrize("name", SHIFTED)
def test_shifted_form_gives_the_packed_forms_bits(kernels_any: Kernels, name: str) -> None:
    """The shifted form (packed filters) computes every tile as the packed form
    (bg_conv2d with plain filters) does: same K slices, same micro-kernel, same bits."""
    case = CASES[name]
    assert conv2d_shifted_bytes(_fields(case)) > 0, "the case no longer takes the shifted form"
    _assert_prepacked_gives_packed_bits(kernels_any, case)


def test_shifted_form_is_chosen_where_it_pays() -> None:
    """3x3 layers of 16..64 channels at 28x28..112x112 take it (1.05-1.55x faster, measured),
    and strided ones up to 32 channels (of over 32 filters: 8-lane registers run fewer pixel
    by pixel); strided ones from 64 channels do not (0.87-1.0x), and 1x1 and depthwise
    convolutions cannot."""
    takes = [Conv(1, 32, 56, 56, 32, (3, 3), pads=(1, 1, 1, 1)),
             Conv(1, 16, 160, 160, 48, (3, 3), stride=(2, 2), pads=(1, 1, 1, 1)),
             Conv(1, 16, 112, 112, 16, (3, 3), pads=(1, 1, 1, 1)),
             Conv(1, 64, 28, 28, 64, (3, 3), pads=(1, 1, 1, 1))]
    keeps = [Conv(1, 64, 56, 56, 64, (1, 1), stride=(2, 2)),
             Conv(1, 64, 56, 56, 128, (3, 3), stride=(2, 2), pads=(1, 1, 1, 1)),
             Conv(1, 64, 56, 56, 64, (1, 1)),
             Conv(1, 64, 56, 56, 64, (3, 3), group=64, pads=(1, 1, 1, 1))]
    assert all(conv2d_shifted_bytes(_fields(c)) > 0 for c in takes)
    assert not any(conv2d_shifted_bytes(_fields(c)) for c in keeps)


def test_small_depthwise_planes_run_channels_last() -> None:
    """Planes whose 8-channel block fits 32 KiB go 8 channels at a time; larger planes,
    depth multipliers and kernels of more than 64 taps keep the per-plane loops (the cases
    above cover both)."""
    assert all(conv2d_is_channels_last(_fields(case)) for name, case in CASES.items()
               if name.startswith("depthwise_cl"))
    assert not any(conv2d_is_channels_last(_fields(case)) for name, case in CASES.items()
                   if name.startswith(("depthwise_plane", "depth_multiplier")))
    takes = [Conv(1, 96, 12, 12, 96, (3, 3), group=96, stride=(2, 2), pads=(0, 0, 1, 1)),
             Conv(1, 1152, 7, 7, 1152, (5, 5), group=1152, pads=(2, 2, 2, 2)),
             Conv(1, 480, 14, 14, 480, (5, 5), group=480, pads=(2, 2, 2, 2))]
    keeps = [Conv(1, 144, 24, 24, 144, (3, 3), group=144, pads=(1, 1, 1, 1)),
             Conv(1, 32, 112, 112, 32, (3, 3), group=32, pads=(1, 1, 1, 1)),
             Conv(1, 8, 9, 9, 8, (9, 9), group=8, pads=(4, 4, 4, 4))]
    assert all(conv2d_is_channels_last(_fields(case)) for case in takes)
    assert not any(conv2d_is_channels_last(_fields(case)) for case in keeps)


def test_strided_stems_run_pixel_by_pixel() -> None:
    """Up to 4 input channels into up to 32 filters (64 at 16 lanes, given 64 taps),
    strided, take the pixel form where vectors are registers; at stride 1 (the shifted
    form reads the image in place too), from 33 filters at 8 lanes, one channel into few
    filters (depthwise-like: the direct form) and with split vectors they do not."""
    wide = ("pixel_stem_48_filters", "pixel_stem_64_filters")
    assert all(conv2d_is_pixel(_fields(case), WIDE) for name, case in CASES.items()
               if name.startswith("pixel_stem"))
    assert all(conv2d_is_pixel(_fields(case)) for name, case in CASES.items()
               if name.startswith("pixel_stem") and name not in wide)
    # split vectors (SSE2, NEON) spill the pixel form's accumulators: the GEMM forms there
    assert not any(conv2d_is_pixel(_fields(case), SPLIT) for name, case in CASES.items()
                   if name.startswith("pixel"))
    assert not any(conv2d_is_pixel(_fields(CASES[name]), tile) for name in wide
                   for tile in (NARROW, SPLIT))
    # past 32 filters at 16 lanes, only with 64 taps a pixel or more
    assert conv2d_is_pixel(_fields(Conv(1, 3, 224, 224, 64, (7, 7), stride=(2, 2),
                                        pads=(3, 3, 3, 3))), WIDE)
    assert not conv2d_is_pixel(_fields(Conv(1, 3, 224, 224, 64, (3, 3), stride=(2, 2))), WIDE)
    keeps = [Conv(1, 3, 32, 32, 32, (3, 3), pads=(1, 1, 1, 1)),
             Conv(1, 3, 224, 224, 64, (7, 7), stride=(2, 2), pads=(3, 3, 3, 3)),
             Conv(1, 1, 32, 32, 4, (3, 3), stride=(2, 2), pads=(1, 1, 1, 1))]
    assert not any(conv2d_is_pixel(_fields(case), tile) for case in keeps
                   for tile in (NARROW, SPLIT))


def test_few_strided_filters_from_many_channels_run_pixel_by_pixel_in_8_lane_registers(
) -> None:
    """From 5 channels on, a strided layer of up to 32 filters takes the pixel form with
    8-lane registers (AVX2) only: not with split vectors (SSE2, NEON), where its
    accumulators spill, nor at 16 lanes (not measured there), nor from 33 filters."""
    many = [Conv(1, 5, 32, 32, 16, (3, 3), stride=(2, 2), pads=(1, 1, 1, 1)),
            Conv(1, 32, 320, 320, 16, (3, 3), stride=(2, 2), pads=(1, 1, 1, 1)),
            CASES["pixel_channels_16"], CASES["pixel_channels_300"]]
    assert all(conv2d_is_pixel(_fields(case), NARROW) for case in many)
    assert not any(conv2d_is_pixel(_fields(case), tile) for case in many
                   for tile in (SPLIT, WIDE))
    assert not conv2d_is_pixel(_fields(Conv(1, 32, 56, 56, 33, (3, 3), stride=(2, 2))),
                               NARROW)
    assert not conv2d_is_pixel(_fields(Conv(1, 32, 56, 56, 32, (3, 3))), NARROW)


def test_one_channel_into_many_filters_is_a_gemm() -> None:
    """Depthwise and small depth multipliers run the sliding window; from 8 filters per
    input channel the GEMM form (its filters packed at create) shares every input load."""
    assert conv2d_is_direct(_fields(CASES["depthwise"]))
    assert conv2d_is_direct(_fields(CASES["depth_multiplier7"]))
    assert not conv2d_is_direct(_fields(CASES["single_channel_image"]))
    assert not conv2d_is_direct(_fields(CASES["stft_as_conv"]))


@pytest.mark.parametrize("name", sorted(TRANSPOSED))
def test_transposed_form_gives_the_packed_forms_bits(kernels_any: Kernels, name: str) -> None:
    """Y^T = im2col^T W^T (filters packed as B at create, the epilogue per column) sums each
    output over the same K slices in the same order as the packed form: the same bits."""
    case = CASES[name]
    assert conv2d_is_transposed(_fields(case)), "the case no longer takes the transposed form"
    _assert_prepacked_gives_packed_bits(kernels_any, case)


def test_transposed_form_is_chosen_for_few_pixels() -> None:
    """7x7 stages and short sequences take it; 14x14 planes, where the 24-wide tiles are
    mostly full, do not."""
    assert conv2d_is_transposed(_fields(Conv(1, 512, 7, 7, 512, (3, 3), pads=(1, 1, 1, 1))))
    assert conv2d_is_transposed(_fields(Conv(1, 129, 1, 4, 128, (1, 3), pads=(0, 1, 0, 1))))
    assert not conv2d_is_transposed(_fields(Conv(1, 256, 14, 14, 256, (3, 3),
                                                 pads=(1, 1, 1, 1))))
