"""Static memory planning: place buffers with known lifetimes into one arena.

Backend-independent: the host executor uses it for the tensors that cross regions, the
`c` backend for its intermediates and kernel workspaces. A buffer lives from the step
that writes it first to the step that reads it last (both inclusive); two buffers may
share bytes only when their lifetimes do not overlap.

The placement is greedy best-fit in decreasing size order (the "greedy by size" strategy
of TFLite's arena planner): large buffers, which constrain the layout most, are placed
first, each into the smallest gap left between the buffers it conflicts with. Ties are
broken by the buffers' order in the input, so the same requests always give the same plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

ALIGNMENT = 64


@dataclass(frozen=True)
class Buffer:
    name: str
    size: int  # bytes; 0 is allowed and takes no space
    first: int  # first step that uses it (writes it)
    last: int  # last step that uses it (inclusive)


@dataclass(frozen=True)
class MemoryPlan:
    offsets: Mapping[str, int]  # buffer name -> byte offset, a multiple of the alignment
    total_bytes: int  # arena bytes the plan needs (a multiple of the alignment)
    unshared_bytes: int  # what giving every buffer its own bytes would take

    @property
    def saved_bytes(self) -> int:
        return self.unshared_bytes - self.total_bytes


def align_up(n: int, alignment: int = ALIGNMENT) -> int:
    return (n + alignment - 1) // alignment * alignment


def _overlaps(a: Buffer, b: Buffer) -> bool:
    return a.first <= b.last and b.first <= a.last


def plan_memory(buffers: Sequence[Buffer], alignment: int = ALIGNMENT) -> MemoryPlan:
    """Offsets for every buffer such that buffers alive at the same step never share bytes."""
    names = [b.name for b in buffers]
    if len(set(names)) != len(names):
        raise ValueError("plan_memory: buffer names must be unique")
    for b in buffers:
        if b.size < 0 or b.first > b.last:
            raise ValueError(f"plan_memory: invalid buffer {b}")
    order = sorted(range(len(buffers)), key=lambda i: (-buffers[i].size, buffers[i].first, i))
    placed: list[tuple[Buffer, int, int]] = []  # (buffer, offset, aligned size)
    offsets: dict[str, int] = {}
    for i in order:
        buf = buffers[i]
        size = align_up(buf.size, alignment)
        busy = sorted((off, off + sz) for other, off, sz in placed if _overlaps(buf, other))
        offsets[buf.name] = _best_fit(busy, size)
        placed.append((buf, offsets[buf.name], size))
    total = max((off + sz for _, off, sz in placed), default=0)
    unshared = sum(align_up(b.size, alignment) for b in buffers)
    return MemoryPlan({n: offsets[n] for n in names}, total, unshared)


def _best_fit(busy: list[tuple[int, int]], size: int) -> int:
    """The start of the smallest free gap that holds `size` bytes, else the end of `busy`."""
    best: tuple[int, int] | None = None  # (gap size, offset)
    cursor = 0
    for start, end in busy:
        gap = start - cursor
        if gap >= size and (best is None or gap < best[0]):
            best = (gap, cursor)
        cursor = max(cursor, end)
    return best[1] if best is not None else cursor
