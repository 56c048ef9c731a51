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


# Below this many elements a side the plain loop nest is as fast: a tile would be mostly edge.
_TILED_TRANSPOSE_MIN_SIDE = 8


def tiled_transpose(
    code: Code,
    shape: Sequence[int],
    src: tuple[str, Sequence[int], int],
    dst: tuple[str, Sequence[int], int],
    element_size: str,
) -> bool:
    """The copy of strided_copy as bg_transpose2d calls when, once dims are merged, it is a
    2-D transpose (the destination's innermost dim strided in the source, and another dim
    contiguous there) under outer loops; False, writing nothing, when it is not one or is
    too thin for tiles to pay."""
    (s_ptr, s_strides, s_base), (d_ptr, d_strides, d_base) = src, dst
    extents, (s_c, d_c) = coalesce(shape, [s_strides, d_strides])
    if not extents or d_c[-1] != 1 or s_c[-1] == 1 or 1 not in s_c:
        return False
    rows = s_c.index(1)  # the source's contiguous dim: rows of the destination
    if min(extents[rows], extents[-1]) < _TILED_TRANSPOSE_MIN_SIDE:
        return False
    outer = [d for d in range(len(extents) - 1) if d != rows]
    with code.loops([extents[d] for d in outer]) as idx:
        x = _offset(s_ptr, linear(idx, [s_c[d] for d in outer], s_base))
        y = _offset(d_ptr, linear(idx, [d_c[d] for d in outer], d_base))
        code.line(
            f"bg_transpose2d({x}, {y}, {extents[rows]}, {extents[-1]}, "
            f"{s_c[-1]}, {d_c[rows]}, {element_size});"
        )
    return True


def _offset(pointer: str, index: str) -> str:
    return pointer if index == "0" else f"{pointer} + {index}"
