"""workspace.py mirrors bg_kernels.h's *_workspace_bytes exactly (too small would be caught
by create(), too large would only waste scratch; both are drift)."""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import pytest

from buildgen.backends.c.workspace import (
    NARROW,
    SPLIT,
    WIDE,
    Tile,
    conv2d_workspace_bytes,
    sgemm_workspace_bytes,
)
from buildgen.resources import include_dir

GEMMS = list(itertools.product((1, 3, 4, 17, 128, 300), (1, 5, 24, 100, 4000), (1, 7, 256, 700)))
CONVS = [
    # N, C, H, W, M, OH, OW, KH, KW, group, sh, sw, dh, dw, pt, pl
    (1, 3, 16, 16, 8, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1),
    (2, 8, 9, 9, 8, 5, 5, 3, 3, 8, 2, 2, 1, 1, 1, 1),
    (1, 6, 8, 8, 12, 6, 6, 3, 3, 6, 1, 1, 1, 1, 0, 0),
    (1, 4, 7, 7, 4, 3, 3, 3, 3, 4, 2, 2, 2, 2, 1, 1),
    (1, 8, 5, 5, 4, 5, 5, 1, 1, 2, 1, 1, 1, 1, 0, 0),
    # the shifted form: two bands of rows; many bands; a dilated 5x5
    (1, 8, 30, 33, 62, 30, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1),
    (1, 16, 112, 112, 16, 112, 112, 3, 3, 1, 1, 1, 1, 1, 1, 1),
    (1, 16, 20, 20, 16, 16, 12, 5, 5, 1, 1, 1, 1, 2, 2, 0),
    (1, 16, 29, 31, 24, 15, 16, 3, 3, 1, 2, 2, 1, 1, 1, 1),
    (1, 12, 23, 17, 20, 8, 17, 3, 3, 1, 3, 1, 2, 1, 2, 0),
    # the transposed form: a 7x7 stage, a short 1-D sequence, a pointwise one
    (1, 96, 7, 7, 96, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1),
    (2, 29, 1, 4, 40, 1, 4, 1, 3, 1, 1, 1, 1, 1, 0, 1),
    (1, 48, 5, 6, 70, 5, 6, 1, 1, 1, 1, 1, 1, 1, 0, 0),
    # the pixel form: a 3x3 stem; a 7x7 one of 64 filters (16 lanes only); 64 of 3x3 (neither);
    # 16 filters from 32 channels (AVX2 registers only)
    (1, 32, 40, 40, 16, 20, 20, 3, 3, 1, 2, 2, 1, 1, 1, 1),
    (1, 3, 32, 32, 24, 16, 16, 3, 3, 1, 2, 2, 1, 1, 1, 1),
    (1, 3, 64, 64, 64, 32, 32, 7, 7, 1, 2, 2, 1, 1, 3, 3),
    (1, 3, 64, 64, 64, 31, 31, 3, 3, 1, 2, 2, 1, 1, 0, 0),
    # the packed form over a padded copy: a small image, strided, a 1-D convolution
    (1, 32, 8, 8, 64, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1),
    (1, 64, 56, 56, 128, 28, 28, 3, 3, 1, 2, 2, 1, 1, 1, 1),
    (1, 40, 1, 50, 48, 1, 50, 1, 5, 1, 1, 1, 1, 1, 0, 2),
]
# A grid of 3x3 layers as CNNs have them, where the forms' plans turn on the map's width
# (a multiple of 8 or 16 lanes or neither: the shifted form's aligned variant), the stride,
# and the channel counts (the packed and transposed forms, the K limit of strided shifts).
CONVS += [
    (1, c, hw * s, hw * s, m, hw, hw, 3, 3, 1, s, s, 1, 1, 1, 1)
    for c, m in ((16, 32), (64, 64), (64, 192), (256, 128))
    for hw in (7, 14, 16, 28, 32, 56)
    for s in (1, 2)
]
FIELDS = [
    "N",
    "C",
    "H",
    "W",
    "M",
    "OH",
    "OW",
    "KH",
    "KW",
    "group",
    "stride_h",
    "stride_w",
    "dil_h",
    "dil_w",
    "pad_top",
    "pad_left",
]


def _runs_avx512() -> bool:
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return False
    return {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"} <= flags


def _runs_avx2() -> bool:
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return False
    return {"avx2", "fma", "bmi2"} <= flags


# The tile each level's kernels use: 4 x 24 at the baseline (its 8-lane vectors split in
# two SSE registers) and at x86-64-v3 (AVX2 registers), 8 x 32 at x86-64-v4.
LEVELS = [pytest.param([], SPLIT, id="baseline"),
          pytest.param(["-march=x86-64-v3"], NARROW, id="x86-64-v3",
                       marks=pytest.mark.skipif(not _runs_avx2(),
                                                reason="this CPU cannot run x86-64-v3 code")),
          pytest.param(["-march=x86-64-v4"], WIDE, id="x86-64-v4",
                       marks=pytest.mark.skipif(not _runs_avx512(),
                                                reason="this CPU cannot run x86-64-v4 code"))]


@pytest.mark.parametrize(("march", "tile"), LEVELS)
def test_mirror_matches_the_kernel_library(c_toolchain: None, tmp_path: Path, march: list[str],
                                           tile: Tile) -> None:
    lines = ["#include <stdio.h>", '#include "bg_kernels.h"', "int main(void) {"]
    for m, n, k in GEMMS:
        lines.append(f'    printf("%zu\\n", bg_sgemm_workspace_bytes({m}, {n}, {k}));')
    for conv in CONVS:
        init = ", ".join(f".{f} = {v}" for f, v in zip(FIELDS, conv, strict=True))
        lines.append(
            f'    printf("%zu\\n", bg_conv2d_workspace_bytes(&(bg_conv2d_params){{{init}}}));'
        )
    lines += ["    return 0;", "}"]
    source = tmp_path / "ws.c"
    source.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "ws"
    subprocess.run(
        ["cc", "-O1", "-std=c11", *march, "-I", str(include_dir()), str(source), "-o", str(exe),
         "-lm"],
        check=True,
    )
    got = [
        int(v)
        for v in subprocess.run(
            [str(exe)], capture_output=True, text=True, check=True
        ).stdout.split()
    ]
    want = [sgemm_workspace_bytes(*g, tile) for g in GEMMS]
    want += [conv2d_workspace_bytes(dict(zip(FIELDS, c, strict=True)), tile) for c in CONVS]
    assert got == want


def test_the_plan_is_the_largest_of_every_tile() -> None:
    """A library holds several levels and picks one at create: it plans for any of them."""
    tiles = (NARROW, SPLIT, WIDE)
    for m, n, k in GEMMS:
        assert sgemm_workspace_bytes(m, n, k) == max(sgemm_workspace_bytes(m, n, k, tile)
                                                     for tile in tiles)
    fields = [dict(zip(FIELDS, c, strict=True)) for c in CONVS]
    for p in fields:
        assert conv2d_workspace_bytes(p) == max(conv2d_workspace_bytes(p, t) for t in tiles)
    assert any(conv2d_workspace_bytes(p, WIDE) > conv2d_workspace_bytes(p, NARROW)
               for p in fields), "no case where the wide tile needs more"
    assert any(conv2d_workspace_bytes(p, SPLIT) > conv2d_workspace_bytes(p, NARROW)
               for p in fields), "no case where split vectors need more (a GEMM, not pixels)"
