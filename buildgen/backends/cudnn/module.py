"""Render a cudnn module: one CUDA translation unit with every cudnn region of a model.

Layout: the header comment, PRELUDE (buildgen.backends.gpu_region), the math mode and the
workspace limit, the helpers (buildgen.backends.cudnn.runtime), the module's constants
(folded biases and scales, as __device__ arrays) and epilogue kernels, the state struct
(the handle and one descriptor set per call), then per region its exported function, and
last M__cudnn_scratch_bytes, _create and _destroy.

Scratch: each region's tensors passed between groups, then (256-byte aligned) the
convolutions' workspace, `workspace_limit_mb` of the target.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from buildgen.backends.c.cwriter import comment
from buildgen.backends.cudnn.algorithms import Recorded, c_name
from buildgen.backends.cudnn.lower import Call, ConvCall, PoolCall, SoftmaxCall, StandaloneCall
from buildgen.backends.cudnn.runtime import (
    CHECK,
    CONV_CREATE,
    CONV_DESCRIPTORS,
    POOL_HELPERS,
    SCALE_KERNEL,
    TENSOR_HELPERS,
)
from buildgen.backends.gpu_epilogue import THREADS, device_array_lines
from buildgen.backends.gpu_region import PRELUDE, RegionFrame, align_up, group_text, module_head
from buildgen.codegen import cnames
from buildgen.ir import Graph

WORKSPACE_ALIGN = 256


# How create ranks a convolution's algorithms (the `algorithm_search` attribute).
ALGORITHM_SEARCH = {
    "heuristic": "cudnnGetConvolutionForwardAlgorithm_v7",
    "benchmark": "cudnnFindConvolutionForwardAlgorithm",
}


@dataclass(frozen=True)
class Settings:
    allow_tf32: bool
    workspace_limit_bytes: int
    algorithm_search: str = "heuristic"  # a key of ALGORITHM_SEARCH
    sm: int | None = None  # the compute capability tuning records are looked up for

    @property
    def math(self) -> str:
        return "CUDNN_DEFAULT_MATH" if self.allow_tf32 else "CUDNN_FMA_MATH"


@dataclass(frozen=True)
class LoweredRegion:
    frame: RegionFrame
    calls: tuple[Call, ...]


def _struct_field(call: Call) -> str | None:
    if isinstance(call, ConvCall):
        return f"bg_conv {call.name};"
    if isinstance(call, PoolCall):
        return f"bg_pool {call.name};"
    if isinstance(call, SoftmaxCall):
        return f"cudnnTensorDescriptor_t {call.name};"
    return None


def _recorded_text(recorded: Recorded | None) -> str:
    if recorded is None:
        return "algorithm: cuDNN's ranking at create (no tuning record)"
    return (f"algorithm {recorded.algorithm}: fastest in {recorded.source} "
            f"({recorded.seconds * 1e6:.4g} us, workspace {recorded.workspace_bytes} bytes)")


def _conv_create(graph: Graph, call: ConvCall, recorded: Recorded | None) -> list[str]:
    n, c, h, w = call.x_shape
    k, _, r, s = call.w_shape
    p, q = call.y_shape[2:]
    g = call.geo
    algo = f"(int){c_name(recorded.algorithm)}" if recorded else "-1"
    spec = (f"{n}, {c}, {h}, {w}, {k}, {r}, {s}, {p}, {q}, {call.groups}, "
            f"{g.pads_begin[0]}, {g.pads_begin[1]}, {g.strides[0]}, {g.strides[1]}, "
            f"{g.dilations[0]}, {g.dilations[1]}, {algo}")
    what = cnames.c_string(f"create ({call.name})")
    weights = f"(const float *)(env->weights + {graph.weight(call.w).offset})"
    lines = [
        "{",
        f"    /* {call.name}: {comment(group_text(graph, call.group))}",
        f"     * {comment(_recorded_text(recorded))} */",
        f"    static const bg_conv_spec spec = {{{spec}}};",
        f"    bg_conv *c = &s->{call.name};",
        f"    if (bg_conv_create(env, s->handle, c, &spec, {what}) != 0) return -1;",
        f"    c->weights = {weights};",
    ]
    if call.scale is not None:
        count = k * (c // call.groups) * r * s
        inner = count // k
        lines += [
            f'    BG_CUDA("cudaMalloc", cudaMalloc((void **)&c->folded, {count * 4}));',
            "    const float *scale = NULL;",
            '    BG_CUDA("cudaGetSymbolAddress", cudaGetSymbolAddress((void **)&scale, '
            f"{call.scale.name}));",
            f"    bg_scale_rows<<<{-(-count // THREADS)}, {THREADS}, 0, stream>>>(c->folded, "
            f"c->weights, scale, {inner}, {count});",
            '    BG_CUDA_LAUNCH("bg_scale_rows");',
            "    c->weights = c->folded;",
        ]
    if call.bias is not None:
        lines.append('    BG_CUDA("cudaGetSymbolAddress", cudaGetSymbolAddress((void **)'
                     f"&c->bias_data, {call.bias.name}));")
    elif call.bias_weight is not None:
        offset = graph.weight(call.bias_weight).offset
        lines.append(f"    c->bias_data = (const float *)(env->weights + {offset});")
    return [*lines, "}"]


def _pool_create(graph: Graph, call: PoolCall) -> list[str]:
    n, c, h, w = call.x_shape
    p, q = call.y_shape[2:]
    g = call.geo
    spec = (f"{n}, {c}, {h}, {w}, {p}, {q}, {g.kernel[0]}, {g.kernel[1]}, {g.pads_begin[0]}, "
            f"{g.pads_begin[1]}, {g.strides[0]}, {g.strides[1]}")
    what = cnames.c_string(f"create ({call.name})")
    return [
        "{",
        f"    /* {call.name}: {comment(group_text(graph, call.group))} */",
        f"    static const bg_pool_spec spec = {{{spec}}};",
        f"    if (bg_pool_create(env, &s->{call.name}, {call.mode}, &spec, {what}) != 0) "
        "return -1;",
        "}",
    ]


def _softmax_create(graph: Graph, call: SoftmaxCall) -> list[str]:
    outer, axis, inner = call.view
    what = cnames.c_string(f"create ({call.name})")
    return [f"/* {call.name}: {comment(group_text(graph, call.group))}: as NCHW "
            f"[{outer}, {axis}, {inner}, 1], normalized along C */",
            f"if (bg_tensor(env, &s->{call.name}, {outer}, {axis}, {inner}, 1, {what}) != 0) "
            "return -1;"]


def _conv_run(graph: Graph, frame: RegionFrame, call: ConvCall) -> list[str]:
    x, y = frame.pointer(graph, call.x), frame.pointer(graph, call.output)
    c = f"s->{call.name}"
    if call.relu:
        # z is the residual (alpha2 = 1), else y itself with alpha2 = 0 (not read).
        z, alpha2 = (frame.pointer(graph, call.residual), "&one") if call.residual else (y, "&zero")
        lines = [
            'BG_CUDNN("cudnnConvolutionBiasActivationForward", '
            f"cudnnConvolutionBiasActivationForward(s->handle, &one, {c}.x, {x}, {c}.w, "
            f"{c}.weights, {c}.conv, {c}.algo, ws, {c}.workspace, {alpha2}, {c}.y, {z}, "
            f"{c}.bias, {c}.bias_data, s->relu, {c}.y, {y}));",
        ]
    else:
        lines = [
            'BG_CUDNN("cudnnConvolutionForward", cudnnConvolutionForward(s->handle, &one, '
            f"{c}.x, {x}, {c}.w, {c}.weights, {c}.conv, {c}.algo, ws, {c}.workspace, &zero, "
            f"{c}.y, {y}));",
        ]
        if call.bias is not None or call.bias_weight is not None:
            lines.append('BG_CUDNN("cudnnAddTensor", cudnnAddTensor(s->handle, &one, '
                         f"{c}.bias, {c}.bias_data, &one, {c}.y, {y}));")
    if call.epilogue is not None:
        lines += call.epilogue.launch(y, y, lambda t: frame.pointer(graph, t))
    fused = f" (fused: {', '.join(call.fused)})" if call.fused else ""
    then = f"; then {call.epilogue.name}" if call.epilogue else ""
    head = f"/* {call.name}: {comment(group_text(graph, call.group) + fused + then)} */"
    return ["{", f"    {head}", *(f"    {line}" for line in lines), "}"]


def _run(graph: Graph, frame: RegionFrame, call: Call) -> list[str]:
    if isinstance(call, ConvCall):
        return _conv_run(graph, frame, call)
    head = f"/* {call.name}: {comment(group_text(graph, call.group))} */"
    pointer: Callable[[str], str] = lambda t: frame.pointer(graph, t)  # noqa: E731
    if isinstance(call, StandaloneCall):
        return [head, *call.epilogue.launch(pointer(call.output), pointer(call.source), pointer)]
    x, y = pointer(call.x), pointer(call.output)
    if isinstance(call, PoolCall):
        p = f"s->{call.name}"
        return [head, 'BG_CUDNN("cudnnPoolingForward", cudnnPoolingForward(s->handle, '
                f"{p}.pool, &one, {p}.x, {x}, &zero, {p}.y, {y}));"]
    d = f"s->{call.name}"
    return [head, 'BG_CUDNN("cudnnSoftmaxForward", cudnnSoftmaxForward(s->handle, '
            f"{call.algorithm}, CUDNN_SOFTMAX_MODE_CHANNEL, &one, {d}, {x}, &zero, {d}, {y}));"]


def _region(model: str, graph: Graph, lowered: LoweredRegion, ws_offset: int) -> list[str]:
    frame = lowered.frame
    rid = frame.region.id
    calls = lowered.calls
    library = [c for c in calls if not isinstance(c, StandaloneCall)]
    # Only what the calls use is declared: nvcc warns about the rest.
    lines = [
        f"/* Region {rid}: {len(frame.region.nodes)} node(s) in {len(calls)} call(s)",
        f" *   inputs:  {comment(', '.join(frame.io.inputs) or '-')}",
        f" *   outputs: {comment(', '.join(frame.io.outputs) or '-')} */",
        f'extern "C" int {model}__cudnn_{rid}(bg_env *env, const void *const *in, '
        "void *const *out)",
        "{",
        f'    const char *where = "region {rid}";',
    ]
    if library:
        lines += ["    bg_cudnn_state *s = (bg_cudnn_state *)env->state;",
                  "    const float one = 1.0f, zero = 0.0f;"]
    if any(getattr(c, "epilogue", None) is not None for c in calls):
        lines.append("    cudaStream_t stream = (cudaStream_t)env->stream;")
    if any(isinstance(c, ConvCall) for c in calls):
        lines.append("    unsigned char *ws = (unsigned char *)(((uintptr_t)(env->scratch + "
                     f"{ws_offset}) + {WORKSPACE_ALIGN - 1}) & ~(uintptr_t){WORKSPACE_ALIGN - 1});")
    lines.append("    (void)in; (void)out;")
    for call in calls:
        lines += [f"    {line}" for line in _run(graph, frame, call)]
    return [*lines, "    return 0;", "}", ""]


def _lifecycle(model: str, graph: Graph, calls: Sequence[Call],
               recorded: Mapping[str, Recorded]) -> list[str]:
    if not calls:  # no cudnn region: no handle (creating one needs a GPU)
        return [f'extern "C" int {model}__cudnn_create(bg_env *env) {{ (void)env; return 0; }}',
                f'extern "C" void {model}__cudnn_destroy(bg_env *env) {{ (void)env; }}']
    create: list[str] = []
    destroy: list[str] = []
    for call in calls:
        if isinstance(call, ConvCall):
            create += _conv_create(graph, call, recorded.get(call.name))
            destroy.append(f"bg_conv_destroy(&s->{call.name});")
        elif isinstance(call, PoolCall):
            create += _pool_create(graph, call)
            destroy.append(f"bg_pool_destroy(&s->{call.name});")
        elif isinstance(call, SoftmaxCall):
            create += _softmax_create(graph, call)
            destroy.append(f"if (s->{call.name} != NULL) "
                           f"cudnnDestroyTensorDescriptor(s->{call.name});")
    relu = any(isinstance(c, ConvCall) and c.relu for c in calls)
    folds = any(isinstance(c, ConvCall) and c.scale is not None for c in calls)
    act = [
        'BG_CUDNN("cudnnCreateActivationDescriptor", cudnnCreateActivationDescriptor(&s->relu));',
        'BG_CUDNN("cudnnSetActivationDescriptor", cudnnSetActivationDescriptor(s->relu, '
        "CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));",
    ] if relu else []
    return [
        "/* Creates the handle once per model instance, on the instance's stream, then every",
        " * call's descriptors and convolution algorithm; folds BatchNormalizations. */",
        f'extern "C" int {model}__cudnn_create(bg_env *env)',
        "{",
        '    const char *where = "create";',
        *(["    cudaStream_t stream = (cudaStream_t)env->stream;"] if folds else []),
        "    bg_cudnn_state *s = (bg_cudnn_state *)calloc(1, sizeof *s);",
        '    if (s == NULL) return bg_fail(env, "calloc", where, "out of memory");',
        "    env->state = s;",
        '    BG_CUDNN("cudnnCreate", cudnnCreate(&s->handle));',
        '    BG_CUDNN("cudnnSetStream", cudnnSetStream(s->handle, (cudaStream_t)env->stream));',
        *(f"    {line}" for line in act + create),
        "    return 0;",
        "}",
        "",
        f'extern "C" void {model}__cudnn_destroy(bg_env *env)',
        "{",
        "    bg_cudnn_state *s = (bg_cudnn_state *)env->state;",
        "    if (s == NULL) return;",
        *(f"    {line}" for line in destroy),
        "    if (s->relu != NULL) cudnnDestroyActivationDescriptor(s->relu);",
        "    if (s->handle != NULL) cudnnDestroy(s->handle);",
        "    free(s);",
        "    env->state = NULL;",
        "}",
    ]


def render_module(model: str, graph: Graph, regions: Sequence[LoweredRegion],
                  settings: Settings, recorded: Mapping[str, Recorded] | None = None) -> str:
    """The module; `recorded`: per convolution call name, the algorithm tuning records chose."""
    recorded = recorded or {}
    calls = [c for r in regions for c in r.calls]
    tensors = max((r.frame.scratch_bytes for r in regions), default=0)
    ws_offset = align_up(tensors, WORKSPACE_ALIGN)
    scratch = ws_offset + settings.workspace_limit_bytes + WORKSPACE_ALIGN if regions else 0
    summary = [f"{r.frame.region.id}: " + ", ".join(
        f"{c.name} {c.group.first.op}" for c in r.calls) for r in regions]
    head = module_head(
        model, graph, "cudnn", "cuDNN 9 (legacy descriptor API)",
        [f"math {settings.math}", f"workspace limit {settings.workspace_limit_bytes} bytes",
         f"algorithms by {ALGORITHM_SEARCH[settings.algorithm_search]}"],
        summary,
        [f"Scratch: {scratch} bytes (tensors between calls {tensors}, then the workspace).",
         f"Convolution algorithms: {len(recorded)} of "
         f"{sum(isinstance(c, ConvCall) for c in calls)} from tuning records, the rest "
         "chosen at create; all within the workspace limit."],
    )
    body = [
        PRELUDE.format(includes="#include <cudnn.h>"),
        f"#define BG_MATH {settings.math}",
        f"#define BG_WORKSPACE_LIMIT ((size_t){settings.workspace_limit_bytes})",
        f"#define BG_ALGORITHMS {ALGORITHM_SEARCH[settings.algorithm_search]}",
        f'#define BG_ALGORITHMS_NAME "{ALGORITHM_SEARCH[settings.algorithm_search]}"',
        CHECK,
    ]
    kinds = {type(c) for c in calls}
    if kinds & {ConvCall, PoolCall, SoftmaxCall}:
        body.append(TENSOR_HELPERS)
    if ConvCall in kinds:
        body += [CONV_DESCRIPTORS, CONV_CREATE]
    if PoolCall in kinds:
        body.append(POOL_HELPERS)
    if any(isinstance(c, ConvCall) and c.scale is not None for c in calls):
        body.append(SCALE_KERNEL)
    for call in calls:
        if isinstance(call, ConvCall):
            for array in (call.scale, call.bias):
                if array is not None:
                    body += device_array_lines(array)
        epilogue = getattr(call, "epilogue", None)
        if epilogue is not None:
            for array in epilogue.arrays:
                body += device_array_lines(array)
            body += [*epilogue.definition(), ""]
    fields = [(f, c) for c in calls if (f := _struct_field(c)) is not None]
    body += [
        "typedef struct bg_cudnn_state {",
        "    cudnnHandle_t handle;",
        "    cudnnActivationDescriptor_t relu;",
        *(f"    {f} /* {comment(group_text(graph, c.group))} */" for f, c in fields),
        "} bg_cudnn_state;",
        "",
    ]
    for r in regions:
        body += _region(model, graph, r, ws_offset)
    tail = [f'extern "C" const size_t {model}__cudnn_scratch_bytes = {scratch};', "",
            *_lifecycle(model, graph, calls, recorded)]
    return "\n".join([*head, *body, *tail]) + "\n"
