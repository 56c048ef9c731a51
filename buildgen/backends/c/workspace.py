"""Workspace sizes of the bg_kernels.h calls, needed at code generation time.

The generated module's scratch size is a compile-time constant (buildgen_abi.h), so the
planner must know how many bytes bg_sgemm / bg_conv2d / bg_*pool3d will want before any C
runs (and, for the weights packed at create, how big each packed form is). These functions
mirror bg_sgemm_workspace_bytes, bg_conv2d_workspace_bytes, the *_packed_*_bytes and
bg_pool3d_workspace_bytes (bg_gemm.h, bg_gemv.h, bg_conv.h, bg_pool.h). Drift cannot
corrupt memory: the generated M__c_create calls the C functions and fails with a clear
message if a planned workspace is too small, and the tests run create for every kernel
shape they generate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Tile:
    """The GEMM micro-kernel's tile (bg_gemm.h BG_GEMM_MR x BG_GEMM_NR) and its vectors'
    lanes (BG_GEMM_VW, which the convolution's pixel form uses too)."""

    mr: int
    nr: int
    lanes: int
    split: bool = False  # 8-lane vectors in two registers (BG_NATIVE_V8 is 0: SSE2, NEON)


# The tile of the 8- and 4-lane levels (AVX2 and 256-bit SVE; SSE2, NEON and riscv64 with
# their vectors split), and of x86-64-v4 (16 lanes). A library holds the code of several
# levels and picks one at create, so the sizes planned here are the largest any of them
# asks for; the predicates (which form a convolution takes) take the tile.
NARROW = Tile(4, 24, 8)
SPLIT = Tile(4, 24, 8, split=True)
WIDE = Tile(8, 32, 16)
TILES = (NARROW, SPLIT, WIDE)
# bg_gemm.h blocking constants
_KC, _MC, _NC = 256, 128, 3072
# bg_conv.h: a band's product in the shifted form (BG__CONV_BAND_FLOATS)
_CONV_BAND_FLOATS = 48 * 1024
# bg_conv.h: output channels per group from which one-input-channel groups run as a GEMM
_CONV_DIRECT_MAX_MG = 8
# bg_conv.h: the largest K of a strided convolution in the shifted form
_CONV_STRIDED_MAX_K = 288
# bg_conv.h: the pixel form's tile of results (pixels), and its least K past 32 filters
_CONV_PIXEL_TILE = 512
_CONV_PIXEL_WIDE_MIN_K = 64


def _round_up(n: int, multiple: int) -> int:
    return (n + multiple - 1) // multiple * multiple


def _largest(size: Callable[..., int], *args: object) -> int:
    return max(size(*args, tile) for tile in TILES)


def sgemm_workspace_bytes(m: int, n: int, k: int, tile: Tile | None = None) -> int:
    """bg_sgemm_workspace_bytes at `tile`, or the largest of every tile's."""
    if tile is None:
        return _largest(sgemm_workspace_bytes, m, n, k)
    if m <= 0 or n <= 0 or k <= 0:
        return 0
    kc = min(k, _KC)
    mc = _round_up(min(m, _MC), tile.mr)
    nc = _round_up(min(n, _NC), tile.nr)
    pack = _round_up(mc * kc, 16) + nc * kc
    gemv = _round_up(k, 16) + (n if m == 1 else m) if (m == 1 or n == 1) else 0
    return max(pack, gemv) * 4 + 64


def sgemm_packed_b_bytes(n: int, k: int, tile: Tile | None = None) -> int:
    """bg_sgemm_packed_b_bytes: NR-wide panels of every K slice."""
    if tile is None:
        return _largest(sgemm_packed_b_bytes, n, k)
    return _round_up(n, tile.nr) * k * 4 if n > 0 and k > 0 else 0


def sgemm_packed_a_bytes(m: int, k: int, tile: Tile | None = None) -> int:
    """bg_sgemm_packed_a_bytes: MR-tall panels of every K slice."""
    if tile is None:
        return _largest(sgemm_packed_a_bytes, m, k)
    return _round_up(m, tile.mr) * k * 4 if m > 0 and k > 0 else 0


def conv2d_is_direct(p: Mapping[str, int]) -> bool:
    """bg__conv_is_direct: one input channel per group and fewer than 8 output channels each
    (depthwise) run as a sliding window, not a GEMM."""
    return p["C"] // p["group"] == 1 and p["M"] // p["group"] < _CONV_DIRECT_MAX_MG


def _window_extent(p: Mapping[str, int]) -> tuple[int, int]:
    """The rows and columns of the padded image the output's windows cover."""
    hp = (p["OH"] - 1) * p["stride_h"] + (p["KH"] - 1) * p["dil_h"] + 1
    wp = (p["OW"] - 1) * p["stride_w"] + (p["KW"] - 1) * p["dil_w"] + 1
    return hp, wp


def _reads_padded_copy(p: Mapping[str, int]) -> bool:
    """bg__conv_direct_copy: the windows reach outside the image, so the direct and the
    packed forms read a zero-padded copy of it."""
    hp, wp = _window_extent(p)
    return p["pad_top"] > 0 or p["pad_left"] > 0 or hp > p["H"] or wp > p["W"]


def _channels_last_floats(p: Mapping[str, int]) -> int:
    hp, wp = _window_extent(p)
    hc, wc = max(hp, p["pad_top"] + p["H"]), max(wp, p["pad_left"] + p["W"])
    return 8 * (hc * wc + p["OH"] * p["OW"])


def conv2d_is_channels_last(p: Mapping[str, int]) -> bool:
    """bg__conv_direct_cl: a depthwise convolution whose 8-channel padded block and results
    fit 32 KiB runs 8 channels at a time, channels last."""
    return (p["M"] == p["C"] == p["group"] and p["KH"] * p["KW"] <= 64
            and _channels_last_floats(p) <= 8 * 1024)


def conv2d_is_pixel(p: Mapping[str, int], tile: Tile = NARROW) -> bool:
    """bg__conv_pixel_plan: a strided convolution of up to 4 input channels into up to four
    vectors of filters (32 at 8 lanes; at 16, 64 given 64 taps a pixel: a network's stem)
    runs pixel by pixel, filters as vectors, the image in place; at 8 lanes, so does one of
    any number of channels into up to 32 filters. Never with split vectors (SSE2, NEON:
    the accumulators spill)."""
    if tile.split:
        return False
    taps = p["C"] * p["KH"] * p["KW"]
    filters = p["M"] <= 32 or (p["M"] <= 4 * tile.lanes and taps >= _CONV_PIXEL_WIDE_MIN_K)
    channels = p["C"] <= 4 or (tile.lanes == 8 and p["M"] <= 32)
    return (p["group"] == 1 and channels and filters and p["OW"] >= 8
            and p["KH"] * p["KW"] > 1 and (p["stride_h"] > 1 or p["stride_w"] > 1)
            and not conv2d_is_direct(p))


def _pixel_filter_bytes(p: Mapping[str, int], tile: Tile) -> int:
    return p["C"] * p["KH"] * p["KW"] * _round_up(p["M"], tile.lanes) * 4


def conv2d_is_transposed(p: Mapping[str, int], tile: Tile = NARROW) -> bool:
    """bg__conv_transposed_plan: few output pixels and many filters compute Y^T, the pixels
    on the GEMM tile's MR-row side (an eighth fewer padded lanes, at least)."""
    if conv2d_is_direct(p) or conv2d_is_pixel(p, tile):
        return False
    mg, n = p["M"] // p["group"], p["OH"] * p["OW"]
    lanes = _round_up(n, tile.nr) * _round_up(mg, tile.mr)
    return 8 * _round_up(n, tile.mr) * _round_up(mg, tile.nr) < 7 * lanes


def _conv2d_is_pointwise(p: Mapping[str, int]) -> bool:
    return (p["KH"] == p["KW"] == p["stride_h"] == p["stride_w"] == 1
            and p["pad_top"] == p["pad_left"] == 0 and p["OH"] == p["H"] and p["OW"] == p["W"])


def conv2d_packed_bytes(p: Mapping[str, int], tile: Tile | None = None) -> int:
    """bg_conv2d_packed_bytes: each group's filters as packed A (packed B in the transposed
    form); 0 for the direct form."""
    if tile is None:
        return _largest(conv2d_packed_bytes, p)
    cg, mg = p["C"] // p["group"], p["M"] // p["group"]
    if conv2d_is_direct(p):
        return 0
    if conv2d_is_pixel(p, tile):
        return _pixel_filter_bytes(p, tile)
    if conv2d_is_transposed(p, tile):
        return p["group"] * sgemm_packed_b_bytes(mg, cg * p["KH"] * p["KW"], tile)
    return p["group"] * sgemm_packed_a_bytes(mg, cg * p["KH"] * p["KW"], tile)


def conv2d_workspace_bytes(p: Mapping[str, int], tile: Tile | None = None) -> int:
    """`p` holds the fields of the bg_conv2d_params the kernel passes (N, C, H, W, M, ...)."""
    if tile is None:
        return _largest(conv2d_workspace_bytes, p)
    cg, mg = p["C"] // p["group"], p["M"] // p["group"]
    if conv2d_is_pixel(p, tile):
        # a tile of 512 pixels' results, then the filters packed (without create's packing)
        results = _CONV_PIXEL_TILE * _round_up(p["M"], tile.lanes) * 4
        return results + _pixel_filter_bytes(p, tile) + 64
    if conv2d_is_direct(p):
        # depthwise: a direct loop, reading each plane through a zero-padded copy when the
        # windows reach outside the image; narrow planes 8 channels at a time, channels last
        if conv2d_is_channels_last(p):
            return _channels_last_floats(p) * 4 + 64
        hp, wp = _window_extent(p)
        return hp * wp * 4 + 64 if _reads_padded_copy(p) else 0
    # GEMM packing space, then (windows reaching into the padding) the padded copy of the
    # image that im2col reads
    columns = p["OH"] * p["OW"]
    k = cg * p["KH"] * p["KW"]
    packed_form = sgemm_workspace_bytes(mg, columns, k, tile)
    if _reads_padded_copy(p):
        hp, wp = _window_extent(p)
        packed_form = (_round_up(packed_form // 4, 16) + cg * hp * wp) * 4 + 64
    if conv2d_is_transposed(p, tile):
        # the im2col matrix (none for 1x1), Y^T, then the GEMM's own workspace
        im2col = 0 if _conv2d_is_pointwise(p) else _round_up(k * columns, 16)
        gemm = (sgemm_workspace_bytes(columns, mg, k, tile) + 3) // 4
        floats = im2col + _round_up(columns * mg, 16) + gemm
        return max(packed_form, floats * 4 + 64)
    return max(packed_form, conv2d_shifted_bytes(p, tile))


def conv2d_shifted_bytes(p: Mapping[str, int], tile: Tile = NARROW) -> int:
    """bg__conv_shift_plan / bg__conv_shift_floats: a convolution whose GEMM reads a padded
    copy of the image (split into stride x stride phase planes) in place, in bands of output
    rows (0 when the packed form is the one chosen)."""
    cg, mg = p["C"] // p["group"], p["M"] // p["group"]
    taps, oh, ow, sh, sw = p["KH"] * p["KW"], p["OH"], p["OW"], p["stride_h"], p["stride_w"]
    if (taps == 1 or conv2d_is_direct(p) or conv2d_is_pixel(p, tile)
            or conv2d_is_transposed(p, tile)):
        return 0
    if (sh > 1 or sw > 1) and cg * taps > _CONV_STRIDED_MAX_K:
        return 0
    hp, wp = _window_extent(p)
    hq, wq = -(-hp // sh), -(-wp // sw)  # a phase plane
    band_rows = min(oh, max(1, _CONV_BAND_FLOATS // (mg * wq)))
    # aligned: the GEMM computes Y's own columns, straight into Y (no product, no copy)
    aligned = ow % tile.lanes == 0

    def columns(rows: int) -> int:
        return rows * ow if aligned else (rows - 1) * wq + ow

    k, n, rows = cg * taps, oh * ow, _round_up(mg, tile.mr)
    tiles = oh // band_rows * _round_up(columns(band_rows), tile.nr)
    if oh % band_rows:
        tiles += _round_up(columns(oh % band_rows), tile.nr)
    copy = 0 if aligned else 4 * mg * n
    if tiles * rows * k + copy >= _round_up(n, tile.nr) * rows * k + 12 * n * k:
        return 0
    image = _round_up(cg * sh * sw * hq * wq + tile.nr, 16)
    product = 0 if aligned else _round_up(mg * columns(band_rows), 16)
    return (image + product + 2 * k) * 4 + 64


def pool3d_workspace_bytes(p: Mapping[str, int]) -> int:
    """The (H, W) pass's result of a 3-D pool, every input depth slice: N*C*D*OH*OW floats."""
    return p["N"] * p["C"] * p["D"] * p["OH"] * p["OW"] * 4
