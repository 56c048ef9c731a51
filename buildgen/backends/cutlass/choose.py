"""Which CUTLASS instantiation (and split-K factor) runs each GEMM and convolution.

Candidates come from the CUTLASS 2.x template space the CUTLASS generator enumerates for
float32: SIMT tiles (any sm, and whenever 3xTF32 is off: plain TF32 would lose float32
accuracy), or tensor-op 3xTF32 tiles with the sm80 instruction 16x8x8 (sm >= 80; these run
unchanged on sm_86/89/90 — a CUTLASS 3.x sm_90a kernel would cost ~30 s of nvcc each).
Tiles whose pipeline needs more shared memory than the sm has are dropped.

The choice, without a GPU to profile on, is deterministic:
  * tuning records (written by `buildgen tune` on a GPU) for any candidate: the fastest;
  * else `find_first_valid`: the first candidate (the generator's tiles, the CUTLASS
    profiler's usual 128x128 first) that can run the problem, with the split-K factor the
    score prefers;
  * else the candidate and split-K factor of lowest analytic score (waves of CTAs times
    the work of one, penalizing narrow loads and split-K's extra pass).
Candidates use the widest alignment the problem allows, or every narrower one too with
`profile_all_alignments` (what `buildgen tune` profiles and records may name).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from buildgen.backends.cutlass.kernels import Instantiation, Tile
from buildgen.backends.cutlass.lower import ConvCall, GemmCall
from buildgen.partition.cost.records import Records

SIMT_TILES = (
    Tile((128, 128, 8), (32, 64, 8), 2), Tile((128, 64, 8), (64, 32, 8), 2),
    Tile((64, 128, 8), (32, 64, 8), 2), Tile((64, 64, 8), (32, 64, 8), 2),
    Tile((128, 32, 8), (64, 32, 8), 2), Tile((32, 128, 8), (32, 64, 8), 2),
)
TF32_TILES = (
    Tile((128, 128, 16), (64, 64, 16), 4), Tile((128, 128, 16), (64, 64, 16), 3),
    Tile((256, 128, 16), (64, 64, 16), 3), Tile((128, 256, 16), (64, 64, 16), 3),
    Tile((128, 64, 16), (64, 32, 16), 4), Tile((64, 128, 16), (32, 64, 16), 4),
    Tile((64, 64, 16), (32, 32, 16), 5),
    # Deeper K steps: 147 and 131 KiB of shared memory, for sm80/87/90 only (not 86/89).
    Tile((256, 128, 32), (64, 64, 32), 3), Tile((128, 128, 32), (64, 64, 32), 4),
)
ALIGNMENTS = (4, 2, 1)  # float elements per access: 16, 8, 4 bytes
BALANCE = 40  # multiply-adds an SM does per float it loads from L2/DRAM, roughly


def smem_limit(sm: int) -> int:
    """Shared memory one CTA may use (bytes), by compute capability."""
    if sm >= 90:
        return 227 * 1024
    if sm in (80, 87):
        return 163 * 1024
    if sm >= 86:
        return 99 * 1024
    return 64 * 1024 if sm >= 75 else 48 * 1024


def sm_count(sm: int) -> int:
    """Multiprocessors of the part the score assumes (A100, A10, L40, H100; T4 below)."""
    return {80: 108, 86: 72, 89: 142, 90: 132}.get(sm, 132 if sm > 90 else 40)


@dataclass(frozen=True)
class Settings:
    sm: int
    use_3xtf32: bool
    split_k_slices: tuple[int, ...]
    profile_all_alignments: bool
    find_first_valid: bool

    @property
    def math(self) -> str:
        return "3xtf32" if self.sm >= 80 and self.use_3xtf32 else "simt"


def settings_of(options: Mapping[str, Any]) -> Settings:
    sm = options.get("sm")
    if not isinstance(sm, int):
        raise ValueError("cutlass: the 'sm' attribute is unset and no cuda arch gives it")
    return Settings(
        sm, bool(options.get("use_3xtf32", True)),
        tuple(sorted(int(s) for s in options.get("split_k_slices", [1]))),
        bool(options.get("profile_all_alignments", False)),
        bool(options.get("find_first_valid", True)),
    )


@dataclass(frozen=True)
class Problem:
    """What a kernel's speed and validity depend on: one GEMM or convolution's shape."""

    op: str  # "gemm" | "conv2d"
    m: int  # conv2d: the implicit GEMM's N*P*Q
    n: int  # conv2d: K
    k: int  # conv2d: C*R*S
    batch: int
    layout_a: str
    layout_b: str
    ld: tuple[int, int, int]  # contiguous extents of A, B, C: what alignment must divide
    epilogue: str
    geometry: tuple[int, ...] = ()  # conv2d: n c h w k r s pad_h pad_w stride_h stride_w ...

    def key(self) -> dict[str, Any]:
        return {"op": self.op, "m": self.m, "n": self.n, "k": self.k, "batch": self.batch,
                "layout_a": self.layout_a, "layout_b": self.layout_b, "epilogue": self.epilogue,
                "geometry": list(self.geometry)}


def gemm_problem(call: GemmCall) -> Problem:
    lda = call.m if call.trans_a else call.k
    ldb = call.k if call.trans_b else call.n
    return Problem("gemm", call.m, call.n, call.k, call.batch,
                   "column" if call.trans_a else "row", "column" if call.trans_b else "row",
                   (lda, ldb, call.n), call.epilogue)


def conv_problem(call: ConvCall) -> Problem:
    geometry = (call.n, call.c, call.h, call.w_in, call.k, call.r, call.s, *call.pads,
                *call.strides, *call.dilations)
    return Problem("conv2d", call.n * call.p * call.q, call.k, call.c * call.r * call.s, 1,
                   "nhwc", "nhwc", (call.c, call.c, call.k), call.epilogue, geometry)


@dataclass(frozen=True)
class Choice:
    kernel: Instantiation
    split_k: int
    reason: str  # "record", "first valid", "heuristic"


def _alignments(extent: int, all_: bool, math_: str) -> tuple[int, ...]:
    if math_ == "simt":
        return (1,)  # SIMT loads one element per access
    fits = tuple(a for a in ALIGNMENTS if extent % a == 0)
    return fits if all_ else fits[:1]


def candidates(problem: Problem, settings: Settings) -> list[Instantiation]:
    """Every instantiation able to run `problem`, in generator order."""
    tiles = TF32_TILES if settings.math == "3xtf32" else SIMT_TILES
    limit = smem_limit(settings.sm)
    out = []
    for tile in tiles:
        if tile.smem_bytes() > limit:
            continue
        for a in _alignments(problem.ld[0], settings.profile_all_alignments, settings.math):
            for b in _alignments(problem.ld[1], settings.profile_all_alignments, settings.math):
                c = _alignments(problem.ld[2], False, settings.math)[0]
                out.append(Instantiation(problem.op, settings.math, tile, problem.layout_a,
                                         problem.layout_b, a, b, c, problem.epilogue))
    return out


def split_factors(problem: Problem, settings: Settings) -> tuple[int, ...]:
    """The split-K factors considered: GEMMs only (not batched), each slice >= 64 deep."""
    if problem.op != "gemm" or problem.batch > 1:
        return (1,)
    return tuple(s for s in settings.split_k_slices if s == 1 or problem.k // s >= 64) or (1,)


def score(problem: Problem, kernel: Instantiation, split: int, sm: int) -> float:
    tm, tn, tk = kernel.tile.threadblock
    ctas = math.ceil(problem.m / tm) * math.ceil(problem.n / tn) * problem.batch * split
    waves = math.ceil(ctas / sm_count(sm))
    steps = math.ceil(math.ceil(problem.k / split) / tk)
    # One CTA's time, roofline-style: its multiply-adds, or the operand tiles it loads
    # (tm + tn per k) times the machine's balance, whichever is longer. Small tiles spread
    # a small problem over more SMs; big tiles reuse more of what they load.
    cta = steps * tk * max(tm * tn, BALANCE * (tm + tn))
    narrow = 1 + 0.25 * (math.log2(4 / kernel.align_a) + math.log2(4 / kernel.align_b))
    reduce = 1 + 0.05 * (split - 1)  # the serial reduction through the workspace
    return waves * cta * narrow * reduce


def record_key(problem: Problem, kernel: Instantiation, split: int, sm: int) -> dict[str, Any]:
    """A tuning record's key for one candidate: nothing names a model."""
    return {"backend": "cutlass", "pattern": "cutlass.kernel", "sm": sm,
            "problem": problem.key(), "kernel": kernel.params(), "split_k": split}


def choose(problem: Problem, settings: Settings, records: Records | None = None) -> Choice:
    found = candidates(problem, settings)
    if not found:
        raise ValueError(f"cutlass: no {settings.math} kernel fits sm {settings.sm}")
    splits = split_factors(problem, settings)
    pairs = [(k, s) for k in found for s in splits]
    if records is not None:
        timed = [(rec.seconds, i) for i, (k, s) in enumerate(pairs)
                 if (rec := records.lookup(record_key(problem, k, s, settings.sm)))]
        if timed:
            best = pairs[min(timed)[1]]
            return Choice(best[0], best[1], "record")
    if settings.find_first_valid:
        first = found[0]
        split = min(splits, key=lambda s: (score(problem, first, s, settings.sm), s))
        return Choice(first, split, "first valid")
    best_index = min(range(len(pairs)),
                     key=lambda i: (score(problem, *pairs[i], settings.sm), i))
    kernel, split = pairs[best_index]
    return Choice(kernel, split, "heuristic")
