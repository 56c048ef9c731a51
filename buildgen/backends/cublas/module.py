"""Render a cublas module: one CUDA translation unit with every cublas region of a model.

Layout: the header comment, PRELUDE (buildgen.backends.gpu_region) with the cuBLAS check
macro, the compute type, `bg_lt_gemm_create` (builds one cuBLASLt matmul: descriptor,
layouts and the heuristic's algorithm), the epilogue kernels, the state struct (handles and
one bg_lt_gemm per cuBLASLt call), then per region its exported function and last
M__cublas_scratch_bytes, _create and _destroy.

Scratch: each region's tensors passed between groups, then (256-byte aligned) the workspace
both cuBLAS and cuBLASLt use, `workspace_mb` of the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from buildgen.backends.c.cwriter import comment, float_literal
from buildgen.backends.cublas.lower import Call, GemmCall, StandaloneCall
from buildgen.backends.cublas.support import GemmGeometry
from buildgen.backends.gpu_epilogue import device_array_lines
from buildgen.backends.gpu_region import (
    PRELUDE,
    RegionFrame,
    align_up,
    group_text,
    module_head,
)
from buildgen.codegen import cnames
from buildgen.ir import Graph

WORKSPACE_ALIGN = 256  # cuBLAS wants its workspace 256-byte aligned
# Every tensor buildgen passes is at least 16-byte aligned (arena offsets are multiples of
# 64): telling cuBLASLt so at create admits its vectorized kernels.
MIN_ALIGNMENT = 16

_CHECK = r"""
#define BG_CUBLAS(name, call) do { cublasStatus_t s_ = (call); \
    if (s_ != CUBLAS_STATUS_SUCCESS) return bg_fail(env, name, where, cublasGetStatusString(s_)); \
} while (0)
"""

# Only in modules with a cuBLASLt call.
_LT_HELPERS = r"""
typedef struct bg_lt_gemm {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c; /* column-major: a is ONNX's B, b is ONNX's A */
    cublasLtMatmulAlgo_t algo;
} bg_lt_gemm;

/* One cuBLASLt matmul D[m, n] = epilogue(op(a)[m, k] * op(b)[k, n]), column-major, with the
 * algorithm cuBLASLt's heuristic picks for this GPU within the workspace. */
static int bg_lt_gemm_create(bg_env *env, cublasLtHandle_t lt, bg_lt_gemm *g,
                             cublasOperation_t op_a, cublasOperation_t op_b, uint64_t m,
                             uint64_t n, uint64_t k, int64_t lda, int64_t ldb,
                             cublasLtEpilogue_t epilogue, const void *bias, const char *where)
{
    BG_CUBLAS("cublasLtMatmulDescCreate",
              cublasLtMatmulDescCreate(&g->desc, BG_COMPUTE, CUDA_R_32F));
    BG_CUBLAS("cublasLtMatmulDescSetAttribute", cublasLtMatmulDescSetAttribute(
        g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    BG_CUBLAS("cublasLtMatmulDescSetAttribute", cublasLtMatmulDescSetAttribute(
        g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    BG_CUBLAS("cublasLtMatmulDescSetAttribute", cublasLtMatmulDescSetAttribute(
        g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    if (bias != NULL)
        BG_CUBLAS("cublasLtMatmulDescSetAttribute", cublasLtMatmulDescSetAttribute(
            g->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    BG_CUBLAS("cublasLtMatrixLayoutCreate", cublasLtMatrixLayoutCreate(
        &g->a, CUDA_R_32F, op_a == CUBLAS_OP_N ? m : k, op_a == CUBLAS_OP_N ? k : m, lda));
    BG_CUBLAS("cublasLtMatrixLayoutCreate", cublasLtMatrixLayoutCreate(
        &g->b, CUDA_R_32F, op_b == CUBLAS_OP_N ? k : n, op_b == CUBLAS_OP_N ? n : k, ldb));
    BG_CUBLAS("cublasLtMatrixLayoutCreate", cublasLtMatrixLayoutCreate(&g->c, CUDA_R_32F, m, n, m));
    cublasLtMatmulPreference_t pref;
    BG_CUBLAS("cublasLtMatmulPreferenceCreate", cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t workspace = BG_WORKSPACE_BYTES;
    const uint32_t align = BG_MIN_ALIGNMENT;
    const cublasLtMatmulPreferenceAttributes_t aligned[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
    for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; ++i)
        s = cublasLtMatmulPreferenceSetAttribute(pref, aligned[i], &align, sizeof align);
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(lt, g->desc, g->a, g->b, g->c, g->c, pref, 1,
                                           &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    BG_CUBLAS("cublasLtMatmulAlgoGetHeuristic", s);
    if (found == 0)
        return bg_fail(env, "cublasLtMatmulAlgoGetHeuristic", where,
                       "no algorithm for this matmul");
    g->algo = result.algo;
    return 0;
}

static void bg_lt_gemm_destroy(bg_lt_gemm *g)
{
    if (g->a != NULL) cublasLtMatrixLayoutDestroy(g->a);
    if (g->b != NULL) cublasLtMatrixLayoutDestroy(g->b);
    if (g->c != NULL) cublasLtMatrixLayoutDestroy(g->c);
    if (g->desc != NULL) cublasLtMatmulDescDestroy(g->desc);
}
"""


@dataclass(frozen=True)
class Settings:
    allow_tf32: bool
    workspace_bytes: int

    @property
    def compute(self) -> str:
        return "CUBLAS_COMPUTE_32F_FAST_TF32" if self.allow_tf32 else "CUBLAS_COMPUTE_32F"


@dataclass(frozen=True)
class LoweredRegion:
    frame: RegionFrame
    calls: tuple[Call, ...]


def _op(transposed: bool) -> str:
    return "CUBLAS_OP_T" if transposed else "CUBLAS_OP_N"


def gemm_args(g: GemmGeometry) -> tuple[str, str, int, int, int, int, int]:
    """(op for ONNX's B, op for A, m, n, k, ld of B, ld of A) of the column-major call that
    computes the row-major product: Y^T[N, M] = op(B)^T op(A)^T, so m = N and n = M."""
    return (_op(g.trans_b), _op(g.trans_a), g.n, g.m, g.k, g.k if g.trans_b else g.n,
            g.m if g.trans_a else g.k)


def _lt_create(model: str, graph: Graph, call: GemmCall) -> list[str]:
    op_b, op_a, m, n, k, ldb, lda = gemm_args(call.geometry)
    bias = "NULL"
    if call.bias is not None:
        bias = f"env->weights + {graph.weight(call.bias).offset}"
    return [
        f"    /* {call.name}: {comment(group_text(graph, call.group))} */",
        f"    if (bg_lt_gemm_create(env, s->lt, &s->{call.name}, {op_b}, {op_a}, {m}, {n}, {k}, "
        f"{ldb}, {lda}, {call.lt_epilogue}, {bias}, "
        f"{cnames.c_string(f'create ({call.name})')}) != 0) return -1;",
    ]


def _gemm_run(graph: Graph, frame: RegionFrame, call: GemmCall) -> list[str]:
    op_b, op_a, m, n, k, ldb, lda = gemm_args(call.geometry)
    a, b = frame.pointer(graph, call.a), frame.pointer(graph, call.b)
    y = frame.pointer(graph, call.output)
    g = call.geometry
    alpha = float_literal(g.alpha)
    if call.lt_epilogue is not None:
        lines = [
            f'BG_CUBLAS("cublasLtMatmul", cublasLtMatmul(s->lt, s->{call.name}.desc, &alpha, '
            f"{b}, s->{call.name}.a, {a}, s->{call.name}.b, &beta, {y}, s->{call.name}.c, "
            f"{y}, s->{call.name}.c, &s->{call.name}.algo, ws, BG_WORKSPACE_BYTES, stream));",
        ]
    else:
        lines = [
            'BG_CUBLAS("cublasGemmStridedBatchedEx", cublasGemmStridedBatchedEx(s->handle, '
            f"{op_b}, {op_a}, {m}, {n}, {k}, &alpha, {b}, CUDA_R_32F, {ldb}, {g.stride_b}, "
            f"{a}, CUDA_R_32F, {lda}, {g.stride_a}, &beta, {y}, CUDA_R_32F, {m}, {g.m * g.n}, "
            f"{g.batch}, BG_COMPUTE, CUBLAS_GEMM_DEFAULT));",
        ]
    if call.epilogue is not None:
        lines += call.epilogue.launch(y, y, lambda t: frame.pointer(graph, t))
    fused = f", fused: {', '.join(call.fused)}" if call.fused else ""
    how = (f"cuBLASLt, {call.lt_epilogue}" if call.lt_epilogue
           else f"cublasGemmStridedBatchedEx, batch {g.batch}")
    kernel = f"; then {call.epilogue.name}" if call.epilogue else ""
    head = [f"/* {call.name}: {comment(group_text(graph, call.group))}",
            f" *   M={g.m} N={g.n} K={g.k} alpha={alpha}: {how}{comment(fused + kernel)} */"]
    return ["{", *(f"    {h}" for h in head), f"    const float alpha = {alpha}, beta = 0.0f;",
            *(f"    {line}" for line in lines), "}"]


def _standalone_run(graph: Graph, frame: RegionFrame, call: StandaloneCall) -> list[str]:
    head = f"/* {call.name}: {comment(group_text(graph, call.group))} (its anchor ran elsewhere) */"
    dest, source = frame.pointer(graph, call.output), frame.pointer(graph, call.source)
    return [head, *call.epilogue.launch(dest, source, lambda t: frame.pointer(graph, t))]


def _region(model: str, graph: Graph, lowered: LoweredRegion, ws_offset: int) -> list[str]:
    frame = lowered.frame
    rid = frame.region.id
    gemms = any(isinstance(c, GemmCall) for c in lowered.calls)
    lines = [
        f"/* Region {rid}: {len(frame.region.nodes)} node(s) in {len(lowered.calls)} call(s)",
        f" *   inputs:  {comment(', '.join(frame.io.inputs) or '-')}",
        f" *   outputs: {comment(', '.join(frame.io.outputs) or '-')} */",
        f'extern "C" int {model}__cublas_{rid}(bg_env *env, const void *const *in, '
        "void *const *out)",
        "{",
        f'    const char *where = "region {rid}";',
    ]
    # Only what the calls use is declared: nvcc warns about the rest.
    if gemms:
        lines += [
            "    bg_cublas_state *s = (bg_cublas_state *)env->state;",
            "    unsigned char *ws = (unsigned char *)(((uintptr_t)(env->scratch + "
            f"{ws_offset}) + {WORKSPACE_ALIGN - 1}) & ~(uintptr_t){WORKSPACE_ALIGN - 1});",
            '    BG_CUBLAS("cublasSetWorkspace", cublasSetWorkspace(s->handle, ws, '
            "BG_WORKSPACE_BYTES));",
        ]
    if any(c.epilogue is not None for c in lowered.calls) or any(
            isinstance(c, GemmCall) and c.lt_epilogue for c in lowered.calls):
        lines.append("    cudaStream_t stream = (cudaStream_t)env->stream;")
    lines.append("    (void)in; (void)out;")
    for call in lowered.calls:
        body = (_gemm_run(graph, frame, call) if isinstance(call, GemmCall)
                else _standalone_run(graph, frame, call))
        lines += [f"    {line}" for line in body]
    return [*lines, "    return 0;", "}", ""]


def _lt_calls(regions: Sequence[LoweredRegion]) -> list[GemmCall]:
    return [c for r in regions for c in r.calls
            if isinstance(c, GemmCall) and c.lt_epilogue is not None]


def _lifecycle(model: str, graph: Graph, regions: Sequence[LoweredRegion]) -> list[str]:
    if not regions:  # no cublas region: no handles (creating them needs a GPU)
        return [f'extern "C" int {model}__cublas_create(bg_env *env) {{ (void)env; return 0; }}',
                f'extern "C" void {model}__cublas_destroy(bg_env *env) {{ (void)env; }}']
    lt = _lt_calls(regions)
    create = [line for call in lt for line in _lt_create(model, graph, call)]
    destroy = [f"    bg_lt_gemm_destroy(&s->{c.name});" for c in lt]
    return [
        "/* Creates the handles once per model instance, on the instance's stream, and every",
        " * cuBLASLt matmul (descriptors, layouts, algorithm). */",
        f'extern "C" int {model}__cublas_create(bg_env *env)',
        "{",
        '    const char *where = "create";',
        "    bg_cublas_state *s = (bg_cublas_state *)calloc(1, sizeof *s);",
        '    if (s == NULL) return bg_fail(env, "calloc", where, "out of memory");',
        "    env->state = s;",
        '    BG_CUBLAS("cublasCreate", cublasCreate(&s->handle));',
        '    BG_CUBLAS("cublasSetStream", cublasSetStream(s->handle, '
        "(cudaStream_t)env->stream));",
        '    BG_CUBLAS("cublasLtCreate", cublasLtCreate(&s->lt));',
        *create,
        "    return 0;",
        "}",
        "",
        f'extern "C" void {model}__cublas_destroy(bg_env *env)',
        "{",
        "    bg_cublas_state *s = (bg_cublas_state *)env->state;",
        "    if (s == NULL) return;",
        *destroy,
        "    if (s->lt != NULL) cublasLtDestroy(s->lt);",
        "    if (s->handle != NULL) cublasDestroy(s->handle);",
        "    free(s);",
        "    env->state = NULL;",
        "}",
    ]


def render_module(model: str, graph: Graph, regions: Sequence[LoweredRegion],
                  settings: Settings) -> str:
    tensors = max((r.frame.scratch_bytes for r in regions), default=0)
    ws_offset = align_up(tensors, WORKSPACE_ALIGN)
    # The workspace is aligned at run time (env->scratch is only 64-byte aligned).
    scratch = ws_offset + settings.workspace_bytes + WORKSPACE_ALIGN if regions else 0
    summary = [f"{r.frame.region.id}: " + ", ".join(
        f"{c.name} {c.group.first.op}" for c in r.calls) for r in regions]
    head = module_head(
        model, graph, "cublas", "cuBLAS and cuBLASLt",
        [f"compute type {settings.compute}", f"workspace {settings.workspace_bytes} bytes"],
        summary,
        [f"Scratch: {scratch} bytes (tensors between calls {tensors}, then the workspace)."],
    )
    prelude = PRELUDE.format(includes="#include <cublas_v2.h>\n#include <cublasLt.h>")
    lt = _lt_calls(regions)
    body = [
        f"#define BG_COMPUTE {settings.compute}",
        f"#define BG_WORKSPACE_BYTES ((size_t){settings.workspace_bytes})",
        f"#define BG_MIN_ALIGNMENT {MIN_ALIGNMENT}",
        _CHECK,
        *([_LT_HELPERS] if lt else []),
    ]
    for r in regions:
        for call in r.calls:
            if call.epilogue is not None:
                for array in call.epilogue.arrays:
                    body += device_array_lines(array)
                body += [*call.epilogue.definition(), ""]
    body += [
        "typedef struct bg_cublas_state {",
        "    cublasHandle_t handle;",
        "    cublasLtHandle_t lt;",
        *(f"    bg_lt_gemm {c.name}; /* {comment(group_text(graph, c.group))} */" for c in lt),
        "} bg_cublas_state;",
        "",
    ]
    for r in regions:
        body += _region(model, graph, r, ws_offset)
    tail = [f'extern "C" const size_t {model}__cublas_scratch_bytes = {scratch};', "",
            *_lifecycle(model, graph, regions)]
    return "\n".join([*head, prelude, *body, *tail]) + "\n"
