"""The per-model cutlass module: region functions calling the shared kernel launchers.

It includes no CUTLASS header (those live in the manifest's kernel shards), so it compiles
in about a second. Per region it lists the ONNX nodes and shapes of every call and the
instantiation chosen (and why), fills a bg_cutlass_*_args struct and calls the launcher on
env->stream. Convolutions run in NHWC, as CUTLASS's implicit GEMM wants: the module
transposes the region's NCHW input into scratch and the NHWC result back (two small
kernels; cheaper than a second code path), and create reorders each filter once from KCRS
to KRSC with any BatchNormalization folded in (scale into the filter, shift into the bias).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from buildgen.backends.cutlass.choose import Choice
from buildgen.backends.cutlass.lower import Call, ConvCall, GeluCall, GemmCall
from buildgen.backends.gpu_region import PRELUDE, align_up, module_head
from buildgen.codegen.cnames import c_string, comment
from buildgen.ir import Graph
from buildgen.partition.boundaries import RegionIO

ALIGN = 256  # every scratch buffer starts on a 256-byte boundary (CUTLASS's widest access)
BLOCK = 256

KERNELS = r"""
/* NCHW -> NHWC (or NHWC -> NCHW with the roles of c and hw swapped): y[n][i][c] = x[n][c][i]. */
__global__ void bg_cutlass_transpose(const float *x, float *y, int n, int c, int hw)
{
    size_t total = (size_t)n * c * hw;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        size_t b = idx / ((size_t)c * hw), rest = idx % ((size_t)c * hw);
        size_t ch = rest / hw, i = rest % hw;
        y[(b * hw + i) * c + ch] = x[idx];
    }
}

/* KCRS -> KRSC, times the folded BatchNormalization scale of each output channel. */
__global__ void bg_cutlass_filter(const float *w, const float *gamma, const float *var,
                                  float eps, float *out, int k, int c, int rs)
{
    size_t total = (size_t)k * c * rs;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        size_t ko = idx / ((size_t)c * rs), rest = idx % ((size_t)c * rs);
        size_t ch = rest / rs, i = rest % rs;
        float scale = gamma ? gamma[ko] / sqrtf(var[ko] + eps) : 1.0f;
        out[(ko * rs + i) * c + ch] = w[idx] * scale;
    }
}

/* bias' = (bias - mean) * scale + beta with BatchNormalization, else bias (or 0). */
__global__ void bg_cutlass_bias(const float *bias, const float *gamma, const float *beta,
                                const float *mean, const float *var, float eps, float *out,
                                int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= k) return;
    float b = bias ? bias[i] : 0.0f;
    if (gamma) b = (b - mean[i]) * (gamma[i] / sqrtf(var[i] + eps)) + beta[i];
    out[i] = b;
}

/* The erf GELU, for a GELU no GEMM of the region computes the input of. */
__global__ void bg_cutlass_gelu(const float *x, float *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

[[maybe_unused]] static inline unsigned bg_cutlass_blocks(size_t n)
{
    size_t blocks = (n + 255) / 256;
    return (unsigned)(blocks < 4096 ? (blocks ? blocks : 1) : 4096);
}

/* The launcher wrote its message to env->error: say which region and nodes called it. */
static inline int bg_cutlass_failed(bg_env *env, const char *where)
{
    char detail[512];
    snprintf(detail, sizeof detail, "%s", env->error);
    return bg_fail(env, "CUTLASS kernel", where, detail);
}
"""


@dataclass(frozen=True)
class PlannedCall:
    call: Call
    choice: Choice | None  # None for the module's own GELU kernel
    temp_offset: int  # start of this call's temporaries in the region's scratch
    temp_bytes: int


@dataclass(frozen=True)
class RegionPlan:
    id: str
    io: RegionIO
    calls: tuple[PlannedCall, ...]
    offsets: dict[str, int]  # tensors passed between calls -> byte offset in scratch
    scratch_bytes: int


@dataclass(frozen=True)
class ConvState:
    """A convolution's filter (KRSC, BN folded) and bias, made once by create."""

    call: ConvCall
    filter_offset: int  # floats into the state buffer
    bias_offset: int


def temp_bytes(call: Call, choice: Choice | None) -> int:
    """Scratch one call needs besides its tensors: NHWC copies, the split-K workspace."""
    if isinstance(call, ConvCall):
        return (align_up(call.n * call.h * call.w_in * call.c * 4, ALIGN)
                + align_up(call.n * call.p * call.q * call.k * 4, ALIGN))
    if isinstance(call, GemmCall) and choice is not None and choice.split_k > 1:
        tm, tn, _ = choice.kernel.tile.threadblock
        tiles = -(-call.m // tm) * -(-call.n // tn)
        return align_up(tiles * 4, ALIGN)  # one semaphore per output tile
    return 0


def _pointer(graph: Graph, plan: RegionPlan, name: str, const: bool = False) -> str:
    cast = "(const float *)" if const else "(float *)"
    if graph.is_weight(name):
        return f"(const float *)(env->weights + {graph.weight(name).offset})"
    if name in plan.io.inputs:
        return f"{cast}in[{plan.io.inputs.index(name)}]"
    if name in plan.io.outputs:
        return f"(float *)out[{plan.io.outputs.index(name)}]"
    return f"(float *)(env->scratch + {plan.offsets[name]})"


def _nodes(graph: Graph, names: Sequence[str]) -> str:
    return " -> ".join(f"{graph.node(n).op} '{n}'" for n in names)


def describe_call(graph: Graph, planned: PlannedCall) -> list[str]:
    call, choice = planned.call, planned.choice
    lines = [_nodes(graph, call.nodes)]
    if isinstance(call, GemmCall):
        shape = f"{call.batch} x " if call.batch > 1 else ""
        lines.append(f"  GEMM {shape}m={call.m} n={call.n} k={call.k}"
                     f"{' A^T' if call.trans_a else ''}{' B^T' if call.trans_b else ''}"
                     f", epilogue {call.epilogue}")
    elif isinstance(call, ConvCall):
        lines.append(f"  Conv2d fprop x=[{call.n},{call.c},{call.h},{call.w_in}] "
                     f"w=[{call.k},{call.c},{call.r},{call.s}] -> [{call.n},{call.k},"
                     f"{call.p},{call.q}], pads {list(call.pads)}, strides "
                     f"{list(call.strides)}, epilogue {call.epilogue}")
    else:
        lines.append(f"  GELU over {call.count} values (the module's elementwise kernel)")
    if choice is not None:
        split = f", split-K {choice.split_k}" if choice.split_k > 1 else ""
        lines.append(f"  {choice.kernel.symbol}: {choice.kernel.describe()}{split} "
                     f"({choice.reason})")
    return lines


def _gemm_lines(graph: Graph, plan: RegionPlan, p: PlannedCall, call: GemmCall) -> list[str]:
    assert p.choice is not None
    d = _pointer(graph, plan, call.output)
    c = _pointer(graph, plan, call.c, const=True) if call.c else f"(const float *){d}"
    lda = call.m if call.trans_a else call.k
    ldb = call.k if call.trans_b else call.n
    ldc = call.n if (call.c_full or not call.c) else 0
    return [
        "        bg_cutlass_gemm_args a;",
        "        memset(&a, 0, sizeof a);",
        f"        a.m = {call.m}; a.n = {call.n}; a.k = {call.k};",
        f"        a.batch = {call.batch}; a.split_k = {p.choice.split_k};",
        f"        a.alpha = {call.alpha!r}f; a.beta = {call.beta!r}f;",
        f"        a.a = {_pointer(graph, plan, call.a, const=True)};",
        f"        a.b = {_pointer(graph, plan, call.b, const=True)};",
        f"        a.c = {c}; a.d = {d};",
        f"        a.lda = {lda}; a.ldb = {ldb}; a.ldc = {ldc}; a.ldd = {call.n};",
        f"        a.stride_a = {call.m * call.k}; a.stride_b = {call.k * call.n};",
        f"        a.stride_c = {call.m * call.n if call.c_full else 0}; "
        f"a.stride_d = {call.m * call.n};",
        f"        a.workspace = env->scratch + {p.temp_offset}; "
        f"a.workspace_bytes = {p.temp_bytes};",
        f"        if ({p.choice.kernel.symbol}(&a, stream, env->error, env->error_size))",
        "            return bg_cutlass_failed(env, where);",
    ]


def _conv_lines(graph: Graph, plan: RegionPlan, p: PlannedCall, call: ConvCall,
                state: ConvState) -> list[str]:
    assert p.choice is not None
    x_nhwc = p.temp_offset
    y_nhwc = p.temp_offset + align_up(call.n * call.h * call.w_in * call.c * 4, ALIGN)
    hw_in, hw_out = call.h * call.w_in, call.p * call.q
    return [
        f"        float *x = (float *)(env->scratch + {x_nhwc});",
        f"        float *y = (float *)(env->scratch + {y_nhwc});",
        "        bg_cutlass_transpose<<<bg_cutlass_blocks("
        f"{call.n * call.c * hw_in}), 256, 0, stream>>>(",
        f"            {_pointer(graph, plan, call.x, const=True)}, x, "
        f"{call.n}, {call.c}, {hw_in});",
        '        BG_CUDA_LAUNCH("NCHW -> NHWC transpose");',
        "        bg_cutlass_conv2d_args a;",
        "        memset(&a, 0, sizeof a);",
        f"        a.n = {call.n}; a.h = {call.h}; a.w = {call.w_in}; a.c = {call.c};",
        f"        a.k = {call.k}; a.r = {call.r}; a.s = {call.s}; a.p = {call.p}; "
        f"a.q = {call.q};",
        f"        a.pad_h = {call.pads[0]}; a.pad_w = {call.pads[1]}; "
        f"a.stride_h = {call.strides[0]}; a.stride_w = {call.strides[1]};",
        f"        a.dilation_h = {call.dilations[0]}; a.dilation_w = {call.dilations[1]};",
        "        a.alpha = 1.0f; a.beta = 1.0f;",
        f"        a.x = x; a.filter = st->buffer + {state.filter_offset}; "
        f"a.bias = st->buffer + {state.bias_offset}; a.y = y;",
        f"        if ({p.choice.kernel.symbol}(&a, stream, env->error, env->error_size))",
        "            return bg_cutlass_failed(env, where);",
        # NHWC -> NCHW is the same transpose with channels and pixels swapped.
        "        bg_cutlass_transpose<<<bg_cutlass_blocks("
        f"{call.n * call.k * hw_out}), 256, 0, stream>>>(",
        f"            y, {_pointer(graph, plan, call.output)}, {call.n}, {hw_out}, {call.k});",
        '        BG_CUDA_LAUNCH("NHWC -> NCHW transpose");',
    ]


def _gelu_lines(graph: Graph, plan: RegionPlan, call: GeluCall) -> list[str]:
    return [
        f"        bg_cutlass_gelu<<<bg_cutlass_blocks({call.count}), 256, 0, stream>>>(",
        f"            {_pointer(graph, plan, call.x, const=True)}, "
        f"{_pointer(graph, plan, call.output)}, {call.count});",
        '        BG_CUDA_LAUNCH("GELU kernel");',
    ]


def render_module(model: str, graph: Graph, plans: Sequence[RegionPlan],
                  states: Sequence[ConvState], settings: list[str]) -> str:
    prefix = f"{model}__cutlass"
    scratch = max((p.scratch_bytes for p in plans), default=0)
    state_floats = max((s.bias_offset + s.call.k for s in states), default=0)
    symbols = sorted({p.choice.kernel.symbol for r in plans for p in r.calls if p.choice})
    summary = [f"{r.id}: {line}" for r in plans for p in r.calls for line in
               describe_call(graph, p)]
    out = module_head(model, graph, "cutlass", "CUTLASS 2.x kernels from the manifest's "
                      "kernel shards", settings, summary,
                      [f"Scratch: {scratch} bytes (tensors between calls, NHWC copies, "
                       "split-K semaphores); shared by all regions."])
    out += [PRELUDE.format(includes='#include <string.h>\n#include "bg_cutlass.h"'), KERNELS]
    out += ["/* The launchers this module calls, defined in the kernel shards. */"]
    for symbol in symbols:
        kind = "gemm" if "_gemm_" in symbol else "conv2d"
        out.append(f'extern "C" int {symbol}(const bg_cutlass_{kind}_args *, cudaStream_t, '
                   "char *, size_t);")
    out += ["", "typedef struct bg_cutlass_state { float *buffer; } bg_cutlass_state;", ""]
    out += [f'extern "C" const size_t {prefix}_scratch_bytes = {scratch};', ""]
    out += _create(prefix, graph, states, state_floats)
    for plan in plans:
        out += _region(prefix, graph, plan, {s.call.output: s for s in states})
    return "\n".join(out) + "\n"


def _create(prefix: str, graph: Graph, states: Sequence[ConvState], floats: int) -> list[str]:
    def w(name: str | None) -> str:
        return f"(const float *)(env->weights + {graph.weight(name).offset})" if name else "NULL"

    lines = [f'extern "C" int {prefix}_create(bg_env *env)', "{",
             '    const char *where = "cutlass create";',
             "    cudaStream_t stream = (cudaStream_t)env->stream;",
             "    bg_cutlass_state *st = (bg_cutlass_state *)calloc(1, sizeof *st);",
             '    if (!st) return bg_fail(env, "calloc", where, "out of memory");',
             "    env->state = st;"]
    if floats:
        lines.append(f'    BG_CUDA("cudaMalloc", cudaMalloc((void **)&st->buffer, '
                     f"{floats} * sizeof(float)));")
    for s in states:
        c = s.call
        bn = c.bn or (None, None, None, None)
        lines += [
            f"    /* {comment(_nodes(graph, c.nodes))}: KCRS -> KRSC"
            f"{', BatchNormalization folded' if c.bn else ''} */",
            f"    bg_cutlass_filter<<<bg_cutlass_blocks({c.k * c.c * c.r * c.s}), 256, 0, "
            f"stream>>>({w(c.w)}, {w(bn[0])}, {w(bn[3])}, {c.epsilon!r}f, "
            f"st->buffer + {s.filter_offset}, {c.k}, {c.c}, {c.r * c.s});",
            '    BG_CUDA_LAUNCH("filter reorder");',
            f"    bg_cutlass_bias<<<{-(-c.k // BLOCK)}, {BLOCK}, 0, stream>>>({w(c.bias)}, "
            f"{w(bn[0])}, {w(bn[1])}, {w(bn[2])}, {w(bn[3])}, {c.epsilon!r}f, "
            f"st->buffer + {s.bias_offset}, {c.k});",
            '    BG_CUDA_LAUNCH("bias fold");',
        ]
    lines += ['    BG_CUDA("cudaStreamSynchronize", cudaStreamSynchronize(stream));',
              "    return 0;", "}", "",
              f'extern "C" void {prefix}_destroy(bg_env *env)', "{",
              "    bg_cutlass_state *st = (bg_cutlass_state *)env->state;",
              "    if (!st) return;",
              "    if (st->buffer) cudaFree(st->buffer);",
              "    free(st);", "    env->state = NULL;", "}", ""]
    return lines


def _region(prefix: str, graph: Graph, plan: RegionPlan, states: dict[str, ConvState]
            ) -> list[str]:
    lines = [f'extern "C" int {prefix}_{plan.id}(bg_env *env, const void *const *in, '
             "void *const *out)", "{",
             "    cudaStream_t stream = (cudaStream_t)env->stream;",
             "    (void)in; (void)out;"]
    if any(isinstance(p.call, ConvCall) for p in plan.calls):
        lines.append("    bg_cutlass_state *st = (bg_cutlass_state *)env->state;")
    for p in plan.calls:
        where = f"cutlass region {plan.id} ({_nodes(graph, p.call.nodes)})"
        lines += [f"    {{ /* {comment(line)} */" if i == 0 else f"       /* {comment(line)} */"
                  for i, line in enumerate(describe_call(graph, p))]
        lines.append(f"        const char *where = {c_string(where)};")
        if isinstance(p.call, GemmCall):
            lines += _gemm_lines(graph, plan, p, p.call)
        elif isinstance(p.call, ConvCall):
            lines += _conv_lines(graph, plan, p, p.call, states[p.call.output])
        else:
            lines += _gelu_lines(graph, plan, p.call)
        lines.append("    }")
    lines += ["    return 0;", "}", ""]
    return lines
