"""One CUTLASS instantiation: its template parameters, its stable name, its C++ text.

An Instantiation is everything that picks a distinct compiled kernel: the operation, the
math (SIMT float32, or 3xTF32 on tensor cores), the tile shapes and pipeline depth, operand
layouts and alignments, and the epilogue. Run-time values (problem sizes, pointers, split-K
slices, batch counts) are launcher arguments, so two regions of two models with one set of
template parameters share one launcher, `bg_cutlass_<op>_<12 hex>`, named by the digest of
the parameters' canonical JSON. Nothing here depends on a model, so the text rendered for
an instantiation is the same in every build.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

Shape3 = tuple[int, int, int]

# math -> (operator class, arch tag, instruction shape, math operator)
MATH = {
    "simt": ("OpClassSimt", "Sm50", (1, 1, 1), "OpMultiplyAdd"),
    "3xtf32": ("OpClassTensorOp", "Sm80", (16, 8, 8), "OpMultiplyAddFastF32"),
}
EPILOGUES = {
    "linear": "LinearCombination",
    "relu": "LinearCombinationRelu",
    "gelu": "LinearCombinationGELU",  # erf GELU, as ONNX's Gelu and torch's default
}
_LAYOUTS = {"row": "cutlass::layout::RowMajor", "column": "cutlass::layout::ColumnMajor",
            "nhwc": "cutlass::layout::TensorNHWC"}


@dataclass(frozen=True)
class Tile:
    threadblock: Shape3
    warp: Shape3
    stages: int

    def describe(self) -> str:
        tb, w = self.threadblock, self.warp
        return f"{tb[0]}x{tb[1]}x{tb[2]}_{w[0]}x{w[1]}x{w[2]}_s{self.stages}"

    def smem_bytes(self) -> int:
        """Shared memory of the main loop's stages (float operands)."""
        m, n, k = self.threadblock
        return (m * k + n * k) * 4 * self.stages


@dataclass(frozen=True)
class Instantiation:
    op: str  # "gemm" (GemmUniversal: plain, batched, serial split-K) or "conv2d" (fprop)
    math: str  # a key of MATH
    tile: Tile
    layout_a: str  # "row" | "column" (gemm), "nhwc" (conv2d)
    layout_b: str  # "row" | "column" (gemm), "nhwc" (conv2d, the KRSC filter)
    align_a: int
    align_b: int
    align_c: int
    epilogue: str  # a key of EPILOGUES

    def params(self) -> dict[str, Any]:
        return {
            "op": self.op, "math": self.math, "threadblock": list(self.tile.threadblock),
            "warp": list(self.tile.warp), "stages": self.tile.stages,
            "layout_a": self.layout_a, "layout_b": self.layout_b, "align_a": self.align_a,
            "align_b": self.align_b, "align_c": self.align_c, "epilogue": self.epilogue,
        }

    @property
    def digest(self) -> str:
        text = json.dumps(self.params(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def symbol(self) -> str:
        return f"bg_cutlass_{self.op}_{self.digest}"

    def describe(self) -> str:
        return (f"{self.op} {self.math} {self.tile.describe()} "
                f"{self.layout_a}/{self.layout_b} align {self.align_a}/{self.align_b}/"
                f"{self.align_c} {self.epilogue}")


def from_params(params: dict[str, Any]) -> Instantiation:
    """The inverse of Instantiation.params (instantiation lists store params)."""
    tb, warp = params["threadblock"], params["warp"]
    tile = Tile((int(tb[0]), int(tb[1]), int(tb[2])), (int(warp[0]), int(warp[1]), int(warp[2])),
                int(params["stages"]))
    return Instantiation(
        params["op"], params["math"], tile, params["layout_a"], params["layout_b"],
        int(params["align_a"]), int(params["align_b"]), int(params["align_c"]),
        params["epilogue"],
    )


def _shape(s: Shape3) -> str:
    return f"cutlass::gemm::GemmShape<{s[0]}, {s[1]}, {s[2]}>"


def _common(inst: Instantiation) -> dict[str, str]:
    opclass, arch, instruction, math_op = MATH[inst.math]
    epilogue = (f"cutlass::epilogue::thread::{EPILOGUES[inst.epilogue]}<float, "
                f"{inst.align_c}, float, float>")
    return {
        "opclass": f"cutlass::arch::{opclass}", "arch": f"cutlass::arch::{arch}",
        "tb": _shape(inst.tile.threadblock), "warp": _shape(inst.tile.warp),
        "inst": _shape(instruction), "math_op": f"cutlass::arch::{math_op}",
        "epilogue": epilogue, "stages": str(inst.tile.stages),
    }


_ERROR = """\
static int bg_cutlass_fail(char *error, size_t size, const char *what, cutlass::Status status)
{
    snprintf(error, size, "%s: %s", what, cutlassGetStatusString(status));
    return 1;
}
"""

_GEMM = """\
// {describe}
using Op_{digest} = cutlass::gemm::device::GemmUniversal<
    float, {layout_a}, float, {layout_b}, float, cutlass::layout::RowMajor, float,
    {opclass}, {arch},
    {tb}, {warp}, {inst},
    {epilogue},
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, {stages},
    {align_a}, {align_b}, {math_op}>;

extern "C" int {symbol}(const bg_cutlass_gemm_args *a, cudaStream_t stream,
                        char *error, size_t error_size)
{{
    using Op = Op_{digest};
    const bool batched = a->batch > 1;
    typename Op::Arguments args(
        batched ? cutlass::gemm::GemmUniversalMode::kBatched
                : cutlass::gemm::GemmUniversalMode::kGemm,
        {{a->m, a->n, a->k}}, batched ? a->batch : a->split_k,
        {{a->alpha, a->beta}}, a->a, a->b, a->c, a->d,
        a->stride_a, a->stride_b, a->stride_c, a->stride_d,
        a->lda, a->ldb, a->ldc, a->ldd);
    Op op;
    cutlass::Status status = op.can_implement(args);
    if (status != cutlass::Status::kSuccess)
        return bg_cutlass_fail(error, error_size, "{symbol}: can_implement", status);
    if (Op::get_workspace_size(args) > a->workspace_bytes) {{
        snprintf(error, error_size, "{symbol}: needs %zu workspace bytes, has %zu",
                 Op::get_workspace_size(args), a->workspace_bytes);
        return 1;
    }}
    status = op.initialize(args, a->workspace, stream);
    if (status == cutlass::Status::kSuccess) status = op.run(stream);
    if (status != cutlass::Status::kSuccess)
        return bg_cutlass_fail(error, error_size, "{symbol}: run", status);
    return 0;
}}
"""

_CONV = """\
// {describe}
using Kernel_{digest} = typename cutlass::conv::kernel::DefaultConv2dFprop<
    float, cutlass::layout::TensorNHWC, float, cutlass::layout::TensorNHWC,
    float, cutlass::layout::TensorNHWC, float,
    {opclass}, {arch},
    {tb}, {warp}, {inst},
    {epilogue},
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, {stages}, {math_op},
    cutlass::conv::IteratorAlgorithm::kOptimized, cutlass::conv::StrideSupport::kStrided,
    {align_a}, {align_b}>::Kernel;
using Op_{digest} = cutlass::conv::device::ImplicitGemmConvolution<Kernel_{digest}>;

extern "C" int {symbol}(const bg_cutlass_conv2d_args *a, cudaStream_t stream,
                        char *error, size_t error_size)
{{
    using Op = Op_{digest};
    using Layout = cutlass::layout::TensorNHWC;
    cutlass::conv::Conv2dProblemSize problem(
        {{a->n, a->h, a->w, a->c}}, {{a->k, a->r, a->s, a->c}},
        {{a->pad_h, a->pad_h, a->pad_w, a->pad_w}}, {{a->stride_h, a->stride_w}},
        {{a->dilation_h, a->dilation_w}}, {{a->n, a->p, a->q, a->k}},
        cutlass::conv::Mode::kCrossCorrelation, 1);
    typename Op::Arguments args(
        problem,
        {{const_cast<float *>(a->x), Layout::packed({{a->n, a->h, a->w, a->c}})}},
        {{const_cast<float *>(a->filter), Layout::packed({{a->k, a->r, a->s, a->c}})}},
        {{const_cast<float *>(a->bias), Layout::Stride(0)}},  // one bias row for every pixel
        {{a->y, Layout::packed({{a->n, a->p, a->q, a->k}})}},
        {{a->alpha, a->beta}});
    Op op;
    cutlass::Status status = op.can_implement(args);
    if (status != cutlass::Status::kSuccess)
        return bg_cutlass_fail(error, error_size, "{symbol}: can_implement", status);
    if (Op::get_workspace_size(args) > a->workspace_bytes) {{
        snprintf(error, error_size, "{symbol}: needs %zu workspace bytes, has %zu",
                 Op::get_workspace_size(args), a->workspace_bytes);
        return 1;
    }}
    status = op.initialize(args, a->workspace, stream);
    if (status == cutlass::Status::kSuccess) status = op(stream);
    if (status != cutlass::Status::kSuccess)
        return bg_cutlass_fail(error, error_size, "{symbol}: run", status);
    return 0;
}}
"""

# What a shard includes: only the headers its instantiations need.
GEMM_HEADERS = ("cutlass/gemm/device/gemm_universal.h",)
CONV_HEADERS = ("cutlass/conv/kernel/default_conv2d_fprop.h",
                "cutlass/conv/device/implicit_gemm_convolution.h")
EPILOGUE_HEADERS = ("cutlass/epilogue/thread/linear_combination.h",
                    "cutlass/epilogue/thread/linear_combination_relu.h",
                    "cutlass/epilogue/thread/linear_combination_gelu.h")


def render(inst: Instantiation) -> str:
    fields = {
        **_common(inst), "digest": inst.digest, "symbol": inst.symbol,
        "describe": inst.describe(), "align_a": str(inst.align_a), "align_b": str(inst.align_b),
        "layout_a": _LAYOUTS[inst.layout_a], "layout_b": _LAYOUTS[inst.layout_b],
    }
    return (_GEMM if inst.op == "gemm" else _CONV).format(**fields)


def headers(instantiations: list[Instantiation]) -> tuple[str, ...]:
    ops = {i.op for i in instantiations}
    found: list[str] = []
    if "gemm" in ops:
        found += GEMM_HEADERS
    if "conv2d" in ops:
        found += CONV_HEADERS
    return (*found, *EPILOGUE_HEADERS) if found else ()


ERROR_HELPER = _ERROR
