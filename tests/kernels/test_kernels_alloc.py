"""bg_alloc_constants (bg_alloc.h): the memory a model instance packs its constants into."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest
from conftest import Kernels

HUGE_PAGE = 2 << 20
LIBC = ctypes.CDLL(None)
LIBC.free.argtypes = [ctypes.c_void_p]


def _vm_flags(address: int) -> list[str]:
    """The VmFlags of the mapping holding `address` (/proc/self/smaps)."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(maxsplit=1)[0]
        if "-" in head and not head.endswith(":"):
            start, end = (int(x, 16) for x in head.split("-"))
            inside = start <= address < end
        elif inside and head == "VmFlags:":
            return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


def test_small_blocks_are_cache_line_aligned(kernels: Kernels) -> None:
    for size in (0, 1, 1000, HUGE_PAGE - 64):
        p = kernels.lib.h_alloc_constants(size)
        assert p and p % 64 == 0
        ctypes.memset(p, 0, max(size, 1))
        LIBC.free(p)


@pytest.mark.skipif(not sys.platform.startswith("linux")
                    or not Path("/sys/kernel/mm/transparent_hugepage").exists(),
                    reason="a kernel without transparent huge pages")
def test_large_blocks_are_huge_page_aligned_and_advised(kernels: Kernels) -> None:
    """Linux's default THP mode (madvise) backs only advised ranges with huge pages: the
    block must be advised whatever the machine's setting, and start on a 2 MiB boundary."""
    size = 5 * HUGE_PAGE + 12345
    p = kernels.lib.h_alloc_constants(size)
    try:
        assert p and p % HUGE_PAGE == 0
        assert "hg" in _vm_flags(p)  # VM_HUGEPAGE: MADV_HUGEPAGE took
        ctypes.memset(p, 1, size)
    finally:
        LIBC.free(p)
