"""The device side of model.c: the CUDA runtime calls the executor makes (its C API only, so
model.c stays C and the host's compiler builds it).

One stream per model instance; the device arena and the device copy of the weights are
allocated and filled at create; copies between host and device are enqueued on the stream
where the partition's transfers say; run synchronizes before a host region that follows
device work and once at its end. Every call is checked: last_error reads
"<call> failed in <where>: <the runtime's message>".
"""

from __future__ import annotations

from collections.abc import Sequence

from buildgen.codegen import cnames
from buildgen.codegen.placement import Placement
from buildgen.codegen.weights_asm import weights_symbol
from buildgen.ir import Graph
from buildgen.partition.model import Transfer
from buildgen.targets.kinds import HOST_DEVICE

STRUCT_FIELDS = [
    "    cudaStream_t stream;           /* every device module's work is enqueued here */",
    "    unsigned char *device_arena;   /* device boundary tensors, then device scratch */",
    "    unsigned char *device_weights; /* the weights blob, uploaded once at create */",
]

RUN_LOCALS = ["    cudaError_t err;"]

DESTROY = [
    "    if (m->device_weights) cudaFree(m->device_weights);",
    "    if (m->device_arena) cudaFree(m->device_arena);",
    "    if (m->stream) cudaStreamDestroy(m->stream);",
]

_PRELUDE = """\
/* "<call> failed in <where>: <message>" into `buf`; returns -1 for the caller to pass on. */
static int cuda_error(char *buf, size_t size, const char *call, const char *where,
                      cudaError_t err) {{
    snprintf(buf, size, "%s failed in %s: %s", call, where, cudaGetErrorString(err));
    return -1;
}}

/* A failed CUDA call in create: the message goes where {model}_last_error(NULL) reads. */
static int cuda_create_error({model}_model *m, const char *call, cudaError_t err) {{
    cuda_error(create_error, sizeof create_error, call, "{model}_create", err);
    {model}_destroy(m);
    return -1;
}}
"""


def prelude(model: str) -> str:
    return _PRELUDE.format(model=model)


def _check(call: str, name: str, where: str, buffer: str = "m->error") -> list[str]:
    return [
        f"    if ((err = {call}) != cudaSuccess)",
        f"        return cuda_error({buffer}, sizeof {buffer}, \"{name}\", "
        f"{cnames.c_string(where)}, err);",
    ]


def create_device(model: str, weights_bytes: int) -> list[str]:
    """create()'s device part: after the host arena, before any module's create."""
    weights = weights_symbol(model)

    def check(call: str, name: str) -> list[str]:
        return [
            f"    if ((err = {call}) != cudaSuccess)",
            f"        return cuda_create_error(m, \"{name}\", err);",
        ]

    # cudaMalloc(0) may return NULL, which destroy() would read as "not allocated": ask for
    # at least one byte so a successful create always holds real allocations.
    return [
        "    {",
        "        /* The device: the current one (cudaSetDevice before create picks another). */",
        "        int devices = 0;",
        "        cudaError_t err = cudaGetDeviceCount(&devices);",
        "        if (err == cudaSuccess && devices == 0) err = cudaErrorNoDevice;",
        "        if (err != cudaSuccess)",
        "            return cuda_create_error(m, \"cudaGetDeviceCount (no usable CUDA device)\","
        " err);",
        *("    " + line for line in check(
            "cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking)",
            "cudaStreamCreateWithFlags")),
        *("    " + line for line in check(
            f"cudaMalloc((void **)&m->device_arena, {model}_device_arena_bytes() + 1)",
            "cudaMalloc (device arena)")),
        *("    " + line for line in check(
            f"cudaMalloc((void **)&m->device_weights, (size_t){weights_bytes} + 1)",
            "cudaMalloc (weights)")),
        "        /* Uploaded once, on the instance's stream, and waited for here so a failure",
        "         * is create's and not the first run's. */",
        *("    " + line for line in check(
            f"cudaMemcpyAsync(m->device_weights, {weights}, (size_t){weights_bytes}, "
            "cudaMemcpyHostToDevice, m->stream)", "cudaMemcpyAsync (weights)")),
        *("    " + line for line in check(
            "cudaStreamSynchronize(m->stream)", "cudaStreamSynchronize (weights)")),
        "    }",
    ]


def _host_pointer(graph: Graph, offsets: dict[str, int], name: str) -> str:
    if name in graph.input_names:
        return f"inputs[{graph.input_names.index(name)}]"
    if name in graph.output_names:
        return f"outputs[{graph.output_names.index(name)}]"
    return f"m->arena + {offsets[name]}"


def copies(graph: Graph, plan: Placement, transfers: Sequence[Transfer], when: str) -> list[str]:
    """The cudaMemcpyAsync calls of `transfers` (all host <-> cuda)."""
    lines: list[str] = []
    for t in transfers:
        nbytes = graph.type_of(t.tensor).nbytes
        if nbytes == 0:
            continue
        host = _host_pointer(graph, plan.host_offsets, t.tensor)
        device = f"m->device_arena + {plan.device_offsets[t.tensor]}"
        to_device = t.source == HOST_DEVICE
        dst, src = (device, host) if to_device else (host, device)
        kind = "cudaMemcpyHostToDevice" if to_device else "cudaMemcpyDeviceToHost"
        where = f"copying '{t.tensor}' to the {'device' if to_device else 'host'} {when}"
        lines.append(f"    /* {cnames.comment(where)}: {nbytes} bytes */")
        lines += _check(f"cudaMemcpyAsync({dst}, {src}, {nbytes}, {kind}, m->stream)",
                        "cudaMemcpyAsync", where)
    return lines


def synchronize(when: str) -> list[str]:
    return _check("cudaStreamSynchronize(m->stream)", "cudaStreamSynchronize", when)
