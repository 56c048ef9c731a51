"""bg_kernels.h compiles warning-free (-Wall -Wextra -Werror) under every flag set, both in a
module that calls every kernel and in one that includes the header and calls nothing (the
static functions must not trip -Wunused-function there)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FLAGS, compile_c

USES_NOTHING = """
#include "bg_kernels.h"
int module_entry(void);
int module_entry(void) { return 0; }
"""

USES_EVERYTHING = """
#include "bg_kernels.h"
void module_entry(float *a, float *b, float *c, void *ws, const bg_conv2d_params *cp,
                  const bg_pool2d_params *pp, const bg_epilogue *ep);
void module_entry(float *a, float *b, float *c, void *ws, const bg_conv2d_params *cp,
                  const bg_pool2d_params *pp, const bg_epilogue *ep)
{
    char why[160];
    bg_threadpool *pool = bg_threadpool_create(2, 4096, why, sizeof why);
    bg_sgemm(0, 1, 4, 5, 6, 1.0f, a, 6, b, 6, 0.0f, c, 5, ep, ws, pool);
    bg_sgemm_pack_b(1, 5, 6, b, 6, ws);
    bg_sgemm_prepacked(0, 4, 5, 6, 1.0f, a, 6, ws, 0.0f, c, 5, ep, b, NULL);
    c[2] = (float)bg_sgemm_packed_b_bytes(5, 6);
    bg_conv2d(cp, a, b, ep, c, ws, pool);
    c[3] = (float)(bg_threads_wanted(0, why, sizeof why) + bg_threadpool_threads(pool));
    bg_threadpool_destroy(pool);
    bg_maxpool2d(pp, a, c, NULL);
    bg_avgpool2d(pp, a, c, NULL);
    c[0] = (float)(bg_sgemm_workspace_bytes(4, 5, 6) + bg_conv2d_workspace_bytes(cp));
    c[1] = bg_gelu(a[0]) + bg_sigmoidf(a[1]) + bg_erff(a[2]);
}
"""


@pytest.mark.parametrize("flags", sorted(FLAGS))
@pytest.mark.parametrize("source", ["uses_nothing", "uses_everything"])
def test_header_compiles_without_warnings(tmp_path: Path, flags: str, source: str) -> None:
    src = tmp_path / f"{source}.c"
    src.write_text(USES_NOTHING if source == "uses_nothing" else USES_EVERYTHING)
    compile_c(src, tmp_path / f"{source}.so", FLAGS[flags])


PARTS = ["bg_gemm.h", "bg_pack.h", "bg_gemv.h", "bg_window.h", "bg_conv.h", "bg_conv_depthwise.h",
         "bg_conv_gemm.h", "bg_conv_pixel.h", "bg_pool.h", "bg_threads.h"]


@pytest.mark.parametrize("part", PARTS)
def test_parts_refuse_direct_include(tmp_path: Path, part: str) -> None:
    """The parts only make sense inside bg_kernels.h; including one alone is an error."""
    src = tmp_path / "direct.c"
    src.write_text(f'#include "{part}"\n')
    with pytest.raises(AssertionError, match="include bg_kernels.h"):
        compile_c(src, tmp_path / "direct.so", FLAGS["generic"])
