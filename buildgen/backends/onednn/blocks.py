"""What every group block of a onednn module is made of: a constant spec, post-ops, and the
static arrays the block derives; shared by specs.py (conv, pooling, norms, lone steps) and
matmul.py (MatMul, Gemm)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from buildgen.backends.c.cwriter import comment
from buildgen.backends.cpu_common.carrays import StaticArray
from buildgen.backends.onednn.layout import RegionLayout
from buildgen.backends.onednn.posts import Post
from buildgen.ir import Graph


@dataclass(frozen=True)
class Block:
    lines: tuple[str, ...]  # the C block inside the region's create function
    arrays: tuple[StaticArray, ...]  # file-scope constants it uses


@dataclass
class Context:
    layout: RegionLayout
    graph: Graph
    weights: Mapping[str, np.ndarray] | None
    name: str  # k<n>: prefix of its static arrays
    arrays: list[StaticArray]

    def array(self, suffix: str, values: Iterable[float], what: str) -> str:
        name = f"{self.name}_{suffix}"
        self.arrays.append(StaticArray(name, tuple(float(v) for v in values), what))
        return name


def dims(values: Iterable[int]) -> str:
    return "{" + ", ".join(str(v) for v in values) + "}"


def spec(ctype: str, fields: Sequence[tuple[str, str]], name: str = "spec") -> list[str]:
    lines = [f"static const {ctype} {name} = {{"]
    line = "   "
    for key, value in fields:
        item = f" .{key} = {value},"
        if len(line) + len(item) > 96:
            lines.append(line)
            line = "   "
        line += item
    return [*lines, line, "};"]


def posts_lines(posts: Sequence[Post]) -> tuple[list[str], str]:
    if not posts:
        return [], "NULL, 0"
    lines = ["static const bg_dnnl_post posts[] = {"]
    lines += [f"    {p.initializer}, /* {comment(p.what)} */" for p in posts]
    return [*lines, "};"], f"posts, {len(posts)}"


