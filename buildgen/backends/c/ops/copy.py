"""Strided copies: the one loop shape behind Transpose, Slice, Expand, Tile and Pad."""

from __future__ import annotations

from collections.abc import Sequence

from buildgen.backends.c.cwriter import Code, coalesce, linear


def strided_copy(
    code: Code,
    shape: Sequence[int],
    src: tuple[str, Sequence[int], int],
    dst: tuple[str, Sequence[int], int],
) -> None:
    """dst[base + idx . strides] = src[base + idx . strides] for every idx of `shape`;
    (pointer, element strides, element base offset) for each side."""
    (s_ptr, s_strides, s_base), (d_ptr, d_strides, d_base) = src, dst
    extents, (s_c, d_c) = coalesce(shape, [s_strides, d_strides])
    with code.loops(extents) as idx:
        code.line(f"{d_ptr}[{linear(idx, d_c, d_base)}] = {s_ptr}[{linear(idx, s_c, s_base)}];")


def chunked_copy(
    code: Code, outer: int, chunk_bytes: int, dst: str, dst_step: int, src: str, src_step: int
) -> None:
    """`outer` memcpy's of `chunk_bytes`, pointers advancing by the given element steps."""
    if outer == 1:
        code.line(f"memcpy({dst}, {src}, {chunk_bytes});")
        return
    with code.block(f"for (int64_t o = 0; o < {outer}; ++o)"):
        code.line(f"memcpy({dst} + o * {dst_step}, {src} + o * {src_step}, {chunk_bytes});")
