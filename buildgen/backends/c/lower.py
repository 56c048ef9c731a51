"""A region of the graph -> an ordered list of steps, where every tensor lives, and the
scratch layout.

Storage rules:
  * region inputs, weights and region outputs live where the caller put them
    (in[i], env->weights + offset, out[j]);
  * a view's output shares its source's bytes. When a view must leave the region and its
    source is computed here (and is no output itself), the source is computed straight into
    the view's out[j]; otherwise the view is copied into out[j] (a Copy step);
  * every other tensor a kernel writes gets a scratch buffer, placed by memplan from its
    lifetime (written at step s, last read - directly or through a view - at step t);
  * the intermediates of fused groups and epilogues are never stored at all;
  * a Concat whose pieces are contiguous in its result (nothing varies before its axis,
    as along the channels of a one-image NCHW tensor) and are each computed here and read
    by the Concat alone is not run: each piece is computed straight into its place in the
    result (a "part" of it), as onnxruntime's and TVM's planners do;
  * empty tensors (a zero dim) take no storage: a unit whose result is empty is not
    lowered at all (it would write no byte), and no kernel binds an empty run-time
    tensor (see registry.py), so nothing reads or writes through such a pointer, which
    the caller may pass as NULL. (Empty weights point into the weights blob: harmless.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from buildgen.backends.c.fused import lower_group
from buildgen.backends.c.fusion import plan_units
from buildgen.backends.c.kernel import Kernel, LowerContext, View
from buildgen.backends.c.ops.common import int_attr, normalize_axis
from buildgen.backends.c.registry import op_table
from buildgen.codegen.memplan import Buffer, MemoryPlan, plan_memory
from buildgen.ir import Graph, Node
from buildgen.partition.boundaries import RegionIO, region_io
from buildgen.partition.model import Region


@dataclass(frozen=True)
class Copy:
    """Bytes of `source` copied into the region output `output` (a view of `source`)."""

    node: Node
    source: str
    output: str
    nbytes: int


@dataclass(frozen=True)
class InPlace:
    """Where a Concat not run would have run: its pieces were written into `output`."""

    node: Node
    output: str


@dataclass(frozen=True)
class Storage:
    kind: Literal["input", "output", "weight", "scratch", "alias", "part"]
    where: int = 0  # in/out index, weight offset, scratch offset or (part) byte offset
    source: str = ""  # alias, part: the tensor whose bytes it shares


@dataclass(frozen=True)
class LoweredRegion:
    region: Region
    io: RegionIO
    steps: tuple[Kernel | View | Copy | InPlace, ...]
    kernel_names: Mapping[int, str]  # step index -> C function name
    storage: Mapping[str, Storage]
    workspace_offsets: Mapping[int, int]  # step index -> scratch offset of its workspace
    plan: MemoryPlan


def lower_region(
    ctx: LowerContext, region: Region, first_kernel: int, fuse: bool = True
) -> LoweredRegion:
    """Lower `region`; its kernels are numbered from `first_kernel` (names are module-wide)."""
    io = region_io(ctx.graph, region)
    table = op_table()
    planned: list[Kernel | View] = []
    nodes = [ctx.graph.node(n) for n in region.nodes]
    for unit in plan_units(ctx, nodes, frozenset(io.outputs), fuse=fuse):
        # The last node holds the unit's result: a group's root, an epilogue's last node
        # (the shape of its anchor's output), or the single node of a kernel or view.
        if writes_nothing(unit.nodes[-1], ctx.graph):
            continue
        if unit.kind == "group":
            planned.append(lower_group(ctx, unit.nodes))
            continue
        lower = table[unit.nodes[0].op].lower
        assert lower is not None
        planned.append(lower(ctx, unit.nodes))
    for step in planned:
        bound = (step.source,) if isinstance(step, View) else (*step.inputs, *step.outputs)
        empty = [t for t in bound if not ctx.graph.is_weight(t) and ctx.graph.type_of(t).numel == 0]
        if empty:
            nodes_text = ", ".join(n.name for n in _step_nodes(step))
            raise RuntimeError(f"c backend: {nodes_text} binds the empty tensor(s) {empty}")
    hosts = _hosted_outputs(planned, io)
    parts = _concat_parts(ctx.graph, planned, io, hosts)
    steps: list[Kernel | View | Copy | InPlace] = []
    for step in planned:
        if isinstance(step, Kernel) and step.outputs[0] in parts:
            steps.append(InPlace(step.nodes[0], step.outputs[0]))
            continue
        steps.append(step)
        if (
            isinstance(step, View)
            and step.output in io.outputs
            and step.output not in hosts.values()
        ):
            nbytes = ctx.graph.type_of(step.output).nbytes
            steps.append(Copy(step.node, step.source, step.output, nbytes))
    return _place(ctx, region, io, steps, hosts, parts, first_kernel)


def writes_nothing(node: Node, graph: Graph) -> bool:
    """True when every output of `node` is empty: running it would write no byte."""
    return all(graph.type_of(name).numel == 0 for name in node.outputs if name)


def _step_nodes(step: Kernel | View) -> tuple[Node, ...]:
    return step.nodes if isinstance(step, Kernel) else (step.node,)


def _place(
    ctx: LowerContext,
    region: Region,
    io: RegionIO,
    steps: list[Kernel | View | Copy | InPlace],
    hosts: Mapping[str, str],
    parts: Mapping[str, Mapping[str, int]],
    first_kernel: int,
) -> LoweredRegion:
    """Storage for every tensor the steps touch, and the scratch plan. `parts`: the
    results of the Concats not run, each with its pieces' byte offsets."""
    graph = ctx.graph
    storage: dict[str, Storage] = {}
    for i, name in enumerate(io.inputs):
        storage[name] = Storage("input", i)
    for j, name in enumerate(io.outputs):
        storage[name] = Storage("output", j)
    for tensor, output in hosts.items():
        storage[tensor] = storage[output]
    piece_of = {piece: (whole, offset)
                for whole, pieces in parts.items() for piece, offset in pieces.items()}
    first: dict[str, int] = {}  # scratch tensor -> step that writes it
    last: dict[str, int] = {}  # scratch tensor -> last step that reads it (or a view of it)
    names: dict[int, str] = {}
    workspaces: list[Buffer] = []
    for s, step in enumerate(steps):
        reads: tuple[str, ...] = ()
        if isinstance(step, Kernel):
            names[s] = f"k{first_kernel + len(names)}_{step.stem}"
            reads = step.inputs
            for out in step.outputs:
                if out in piece_of:  # written in place: its whole lives from now on
                    whole, offset = piece_of[out]
                    storage[out] = Storage("part", offset, whole)
                    if whole not in storage:
                        storage[whole] = Storage("scratch")
                        first[whole] = s
                if out not in storage:
                    storage[out] = Storage("scratch")
                    first[out] = s
            if step.workspace:
                workspaces.append(Buffer(f"w:{names[s]}", step.workspace, s, s))
        elif isinstance(step, View):
            if step.output not in storage:
                storage[step.output] = Storage("alias", source=step.source)
        elif isinstance(step, Copy):
            reads = (step.source,)
        for tensor in (*reads, *((step.source,) if isinstance(step, View) else ())):
            if graph.is_weight(tensor):
                storage.setdefault(tensor, Storage("weight", graph.weight(tensor).offset))
        for tensor in reads:
            root = _root(storage, tensor)
            if root in first:
                last[root] = s

    buffers = [
        Buffer(f"t:{name}", graph.type_of(name).nbytes, first[name], last.get(name, first[name]))
        for name in first
    ]
    plan = plan_memory([*buffers, *workspaces])
    for name in first:
        storage[name] = Storage("scratch", plan.offsets[f"t:{name}"])
    ws_offsets = {b.first: plan.offsets[b.name] for b in workspaces}
    return LoweredRegion(region, io, tuple(steps), names, storage, ws_offsets, plan)


def _hosted_outputs(steps: list[Kernel | View], io: RegionIO) -> dict[str, str]:
    """Region outputs that are views of a tensor this region computes: that tensor is
    written straight into the output's buffer, so the view needs no copy. Returns
    {computed tensor: region output}; at most one output per tensor."""
    sources = {s.output: s.source for s in steps if isinstance(s, View)}
    computed = {t for s in steps if isinstance(s, Kernel) for t in s.outputs}
    hosts: dict[str, str] = {}
    for output in io.outputs:
        if output not in sources:
            continue
        root = output
        while root in sources:
            root = sources[root]
        if root in computed and root not in io.outputs and root not in hosts:
            hosts[root] = output
    return hosts


def _root(storage: Mapping[str, Storage], tensor: str) -> str:
    """The tensor that owns the bytes `tensor` reads (following views and parts)."""
    while tensor in storage and storage[tensor].kind in ("alias", "part"):
        tensor = storage[tensor].source
    return tensor


def _concat_parts(graph: Graph, steps: list[Kernel | View], io: RegionIO,
                  hosts: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """{Concat result: {piece: byte offset}} for each Concat that need not run: every
    piece is contiguous in the result, computed by a kernel of this region for the Concat
    alone (so it can be written in place), and stored nowhere else (no input, output or
    hosted output; a tensor listed twice would need two places)."""
    computed = {t: k for k in steps if isinstance(k, Kernel) for t in k.outputs}
    readers: dict[str, int] = {}
    for step in steps:
        reads = (step.source,) if isinstance(step, View) else step.inputs
        for tensor in reads:
            readers[tensor] = readers.get(tensor, 0) + 1
    fixed = {*io.inputs, *io.outputs, *hosts}
    found: dict[str, dict[str, int]] = {}
    for step in steps:
        if not (isinstance(step, Kernel) and len(step.nodes) == 1
                and step.nodes[0].op == "Concat"):
            continue
        whole = step.outputs[0]
        shape = graph.type_of(whole).shape
        axis = normalize_axis(int_attr(step.nodes[0], "axis", 0), len(shape))
        pieces = [t for t in step.nodes[0].inputs if t and graph.type_of(t).numel]
        if any(d != 1 for d in shape[:axis]) or len(set(pieces)) != len(pieces):
            continue
        # A piece made by a Concat that is not run has no kernel to write it in place.
        if not all(t in computed and t not in fixed and readers.get(t) == 1
                   and computed[t].outputs[0] not in found for t in pieces):
            continue
        offsets, at = {}, 0
        for piece in pieces:
            offsets[piece] = at
            at += graph.type_of(piece).nbytes
        found[whole] = offsets
    return found
