"""One cuda region -> steps (kernel launches and copies) and where each tensor lives.

Nodes are grouped in order: an elementwise node joins the chain before it when it reads a
value of that chain and has the chain's shape (buildgen.backends.cuda.elementwise); a view
(Reshape, Flatten, ...) whose result stays inside the region aliases its input; every other
node is one launch. Values the region makes and uses itself live in its scratch (device
memory, env->scratch) at offsets planned like the executor's arenas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from buildgen.backends.cuda import ops
from buildgen.backends.cuda.elementwise import fuse, is_elementwise
from buildgen.backends.cuda.support import VIEWS
from buildgen.codegen import cnames
from buildgen.codegen.memplan import Buffer, MemoryPlan, plan_memory
from buildgen.ir import Graph, Node
from buildgen.partition.boundaries import RegionIO, region_io
from buildgen.partition.model import Region

if TYPE_CHECKING:
    import numpy as np

ALIGNMENT = 256  # as cudaMalloc's: a tensor in scratch is as aligned as an allocation


@dataclass(frozen=True)
class Step:
    what: str  # "Gemm '/fc1/Gemm'" ... for comments and error messages
    lines: tuple[str, ...]  # statements; `where` names the step in CUDA errors


@dataclass(frozen=True)
class LoweredRegion:
    region: Region
    io: RegionIO
    declarations: tuple[str, ...]
    steps: tuple[Step, ...]
    kernels: tuple[tuple[str, ...], ...]  # fused kernel definitions
    scratch_bytes: int
    unshared_bytes: int  # what its scratch buffers would take without sharing bytes
    buffers: int  # how many scratch buffers were planned


def _groups(graph: Graph, region: Region) -> list[list[Node]]:
    groups: list[list[Node]] = []
    for name in region.nodes:
        node = graph.node(name)
        last = groups[-1] if groups else None
        if (
            last is not None and is_elementwise(node.op) and is_elementwise(last[0].op)
            and graph.type_of(node.outputs[0]).shape == graph.type_of(last[0].outputs[0]).shape
            and any(t in {o for n in last for o in n.outputs} for t in node.inputs)
        ):
            last.append(node)
        else:
            groups.append([node])
    return groups


def _what(nodes: list[Node]) -> str:
    shown = ", ".join(f"{n.op} '{n.name}'" for n in nodes[:3])
    return shown + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")


class _Storage:
    """Where tensors live and what the region function calls them."""

    def __init__(self, graph: Graph, io: RegionIO):
        self.graph = graph
        self.io = io
        self.alias: dict[str, str] = {}  # view output -> the tensor it aliases
        self.names: dict[str, str] = {}
        self.used: set[str] = {"env", "in", "out", "stream", "err", "where", "p", "d"}

    def root(self, tensor: str) -> str:
        while tensor in self.alias:
            tensor = self.alias[tensor]
        return tensor

    def ptr(self, tensor: str) -> str:
        if tensor not in self.names:
            base = cnames.identifier(tensor)
            name, k = base, 1
            while name in self.used:
                name, k = f"{base}_{k}", k + 1
            self.used.add(name)
            self.names[tensor] = name
        return self.names[tensor]


def lower_region(
    graph: Graph, region: Region, weights: Mapping[str, np.ndarray] | None, kernel_base: int
) -> LoweredRegion:
    io = region_io(graph, region)
    store = _Storage(graph, io)
    outputs = set(io.outputs)
    members = set(region.nodes)
    steps: list[Step] = []
    kernels: list[tuple[str, ...]] = []
    written: dict[str, int] = {}  # tensor -> step writing it
    reads: list[tuple[str, int]] = []
    for nodes in _groups(graph, region):
        node, step = nodes[0], len(steps)
        what = _what(nodes)
        if node.op in VIEWS and node.outputs[0] not in outputs:
            store.alias[node.outputs[0]] = node.inputs[0]
            continue
        inputs = [t for n in nodes for t in n.inputs if t]
        reads += [(t, step) for t in inputs]
        if node.op in VIEWS:
            src, dst = node.inputs[0], node.outputs[0]
            nbytes = graph.type_of(dst).nbytes
            lines = [f"    err = cudaMemcpyAsync({store.ptr(dst)}, {store.ptr(src)}, {nbytes}, "
                     "cudaMemcpyDeviceToDevice, stream);",
                     "    if (err != cudaSuccess) return bg_fail(env, \"cudaMemcpyAsync\", "
                     "where, err);"]
            written[dst] = step
        elif is_elementwise(node.op):
            group = {n.name for n in nodes}
            stored = [n.outputs[0] for n in nodes if n.outputs[0] in outputs or any(
                c.name not in group for c in graph.consumers(n.outputs[0]) if c.name in members)]
            name = f"k{kernel_base + len(kernels)}_" + "_".join(n.op.lower() for n in nodes[:4])
            fused = fuse(graph, nodes, stored, name, weights)
            kernels.append(fused.definition)
            args = [store.ptr(t) for t in (*fused.inputs, *fused.outputs)]
            lines = [f"    {name}<<<bg_blocks({fused.numel}), BG_THREADS, 0, stream>>>("
                     f"{', '.join([*args, str(fused.numel)])});", *_launch_check(name)]
            written.update((t, step) for t in stored)
        else:
            lines = [*ops.LAUNCHERS[node.op](node, graph, store.ptr, weights)]
            if not lines[-1].startswith("    if"):
                lines += _launch_check(lines[-1].split("<<<")[0].strip())
            written.update((t, step) for t in node.outputs if t)
        steps.append(Step(what, tuple(lines)))
    plan, declarations = _place(graph, io, store, written, reads)
    return LoweredRegion(region, io, tuple(declarations), tuple(steps), tuple(kernels),
                         plan.total_bytes, plan.unshared_bytes, len(plan.offsets))


def _launch_check(kernel: str) -> list[str]:
    return ["    err = cudaGetLastError();",
            f"    if (err != cudaSuccess) return bg_fail(env, \"{kernel} launch\", where, err);"]


def _place(
    graph: Graph, io: RegionIO, store: _Storage, written: dict[str, int],
    reads: list[tuple[str, int]],
) -> tuple[MemoryPlan, list[str]]:
    """The scratch plan and the pointer declarations of every tensor the steps name."""
    last: dict[str, int] = dict(written)
    for tensor, step in reads:
        root = store.root(tensor)
        if root in last:
            last[root] = max(last[root], step)
    scratch = [t for t in written if t not in io.outputs]
    plan = plan_memory([Buffer(t, graph.type_of(t).nbytes, written[t], last[t]) for t in scratch],
                       ALIGNMENT)
    for tensor in list(store.names):
        store.ptr(store.root(tensor))  # an alias's declaration names its root
    # Roots first, then the aliases that name them.
    ordered = sorted(store.names, key=lambda t: t != store.root(t))
    lines = []
    for tensor in ordered:
        ctype = graph.type_of(tensor).dtype.c_type
        root = store.root(tensor)
        if tensor in io.outputs:
            value, const = f"({ctype} *)out[{io.outputs.index(tensor)}]", ""
        elif tensor != root:
            value, const = f"(const {ctype} *){store.ptr(root)}", "const "
        elif tensor in io.inputs:
            value, const = f"(const {ctype} *)in[{io.inputs.index(tensor)}]", "const "
        elif graph.is_weight(tensor):
            offset = graph.weight(tensor).offset
            value, const = f"(const {ctype} *)(env->weights + {offset})", "const "
        else:
            value, const = f"({ctype} *)(env->scratch + {plan.offsets[tensor]})", ""
        shape = ", ".join(map(str, graph.type_of(tensor).shape))
        note = cnames.comment(f"{tensor} [{shape}]")
        lines.append(f"    {const}{ctype} *{store.ptr(tensor)} = {value}; /* {note} */")
    return plan, lines
