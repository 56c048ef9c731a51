"""A oneDNN region's tensor table: which tensors a region touches, where each lives, and which
may keep the blocked layout a convolution or pooling picks (`flexible`).

A tensor is flexible when a Conv, pooling, Concat or elementwise steps on their own (an
eltwise or binary primitive) produce it inside the region and every reader is inside the
region too and takes any layout: the input of a Conv or pooling, any input of a Concat, the
source of elementwise steps on their own, the residual a Conv adds with a sum post-op
(copied into the Conv's output by a reorder, which converts the layout), or, in
channels-last, a full-size binary operand of a group whose output is flexible itself (a
post-op's src1 in the layout of its dst: an FPN's x + upsampled, x + x * s). It is then in the
backend's activation layout (channels-last by default). Everything else is plain, as ONNX
lays it out. Internal tensors live in the arena; when oneDNN may pick a blocked layout
(activation_layout: any), a flexible one is planned at an upper bound (channels rounded up
to 16), and its real size checked at create.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from buildgen.backends.c.cwriter import Names
from buildgen.backends.cpu_common.groups import Group, group_region
from buildgen.backends.cpu_common.plan import plan_groups
from buildgen.backends.cpu_common.steps import Binary
from buildgen.backends.onednn.support import RULES
from buildgen.codegen.memplan import MemoryPlan
from buildgen.ir import Graph, Node
from buildgen.partition.boundaries import RegionIO, region_io
from buildgen.partition.model import Region

# LRN, resampling and concat read any layout and write the one they read (dst `any`);
# a concat reads every input so.
LAYOUT_PRODUCERS = frozenset(("Conv", "MaxPool", "AveragePool", "LRN", "Resize", "Upsample",
                              "Concat", "Split"))
LAYOUT_READERS = frozenset(("Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
                            "ReduceMean", "LRN", "Resize", "Upsample", "Concat", "Split"))
ANY_INPUT_READERS = frozenset(("Concat",))
SIDE_OUTPUTS = frozenset(("LSTM", "GRU", "RNN"))  # anchors whose later outputs are tensors too
SPLITS = frozenset(("Split",))  # anchors whose every output is one, in the input's layout
CHANNEL_BLOCK = 16  # the widest channel block oneDNN uses for float32 (AVX-512)


@dataclass(frozen=True)
class TensorEntry:
    name: str
    role: str  # "in", "out" or "internal"
    index: int  # in[] / out[] index; -1 for internal tensors
    flexible: bool
    offset: int  # internal tensors: arena offset
    bytes: int  # internal tensors: arena bytes planned
    shape: tuple[int, ...]
    enum: str  # its index's name in the generated table, e.g. r0_stem_Relu_output_0


@dataclass(frozen=True)
class RegionLayout:
    region: Region
    io: RegionIO
    groups: tuple[Group, ...]
    tensors: tuple[TensorEntry, ...]
    plan: MemoryPlan
    in_place: tuple[tuple[str, str], ...] = ()  # (Conv output, the residual it takes over)

    def entry(self, tensor: str) -> TensorEntry:
        for entry in self.tensors:
            if entry.name == tensor:
                return entry
        raise KeyError(tensor)

    def enum(self, tensor: str) -> str:
        return self.entry(tensor).enum


def sum_step(group: Group, graph: Graph) -> Binary | None:
    """The residual a Conv group adds with a sum post-op: its first Add of a full-size tensor."""
    if group.anchor is None or group.anchor.op != "Conv":
        return None
    shape = graph.type_of(group.output).shape
    for step in group.steps:
        if (
            isinstance(step, Binary)
            and step.op == "Add"
            and not graph.is_weight(step.other)
            and graph.type_of(step.other).shape == shape
        ):
            return step
    return None


def _outputs(group: Group) -> tuple[str, ...]:
    if group.anchor is not None and group.anchor.op in SPLITS:
        return tuple(group.anchor.outputs)
    return (group.output,)


def _flexible(tensor: str, graph: Graph, groups: tuple[Group, ...], io: RegionIO,
              operand_into: frozenset[str] = frozenset()) -> bool:
    """Whether `tensor` may be in the activation layout; `operand_into`: outputs known to
    be, whose groups may read it as a full-size binary operand in that layout too."""
    producer = next(g for g in groups if tensor in _outputs(g))
    # Elementwise steps on their own (an eltwise or binary primitive) write `any`: the
    # layout of their source.
    if producer.anchor is not None and producer.anchor.op not in LAYOUT_PRODUCERS:
        return False
    if tensor in io.outputs:
        return False
    by_node = {n.name: g for g in groups for n in g.nodes}
    for reader in graph.consumers(tensor):
        group = by_node.get(reader.name)
        if group is None:
            return False
        if group.anchor is None and reader is group.first and tensor == group.source:
            continue  # an eltwise or binary primitive's src: any layout
        if group.anchor is reader:
            data = reader.inputs if reader.op in ANY_INPUT_READERS else reader.inputs[:1]
            if reader.op not in LAYOUT_READERS or tensor in reader.inputs and tensor not in data:
                return False
            continue
        residual = sum_step(group, graph)
        if residual is not None and residual.node is reader and residual.other == tensor:
            continue
        if group.output not in operand_into or not _full_size_operand(group, reader, tensor, graph):
            return False
    return True


def _full_size_operand(group: Group, reader: Node, tensor: str, graph: Graph) -> bool:
    """Whether `reader` is one of the group's binary steps reading `tensor` as its other
    operand at the chain's shape: a post-op's src1, which oneDNN reads in the layout the
    primitive writes (FPN's x + upsampled)."""
    return any(
        isinstance(step, Binary) and step.node is reader and step.other == tensor
        and graph.type_of(tensor).shape == graph.type_of(reader.outputs[0]).shape
        for step in group.steps
    )


def _in_place(graph: Graph, groups: tuple[Group, ...], flexible: set[str]) -> dict[str, str]:
    """Conv outputs that may accumulate their sum onto the residual's own bytes: both are
    flexible, and the residual is neither read after that Conv nor its input."""
    pairs: dict[str, str] = {}
    for index, group in enumerate(groups):
        residual = sum_step(group, graph)
        if residual is None or group.output not in flexible or residual.other not in flexible:
            continue
        assert group.anchor is not None
        later = [g for g in groups[index + 1 :] if residual.other in g.reads(graph)]
        uses = [s for s in group.steps if isinstance(s, Binary) and s.other == residual.other]
        if not later and len(uses) == 1 and residual.other not in group.anchor.inputs:
            pairs[group.output] = residual.other
    return pairs


def flexible_bytes(shape: tuple[int, ...], blocked: bool) -> int:
    """Arena bytes of a flexible tensor: its own size in channels-last or plain, the size
    with channels rounded up to the widest block when oneDNN may pick a blocked layout."""
    channels = -(-shape[1] // CHANNEL_BLOCK) * CHANNEL_BLOCK if blocked else shape[1]
    return shape[0] * channels * prod(shape[2:]) * 4


def region_layout(graph: Graph, region: Region, blocked: bool = False) -> RegionLayout:
    io = region_io(graph, region)
    groups = tuple(group_region(graph, region.nodes, RULES))
    names: list[str] = list(io.inputs)
    side: dict[str, int] = {}  # Y_h / Y_c of a recurrent group, a Split's later outputs -> step
    recurrent: set[str] = set()  # plain: an RNN writes them in ONNX's layout
    for step, group in enumerate(groups):
        names += [t for t in group.reads(graph) if t not in names]
        names.append(group.output)
        if group.anchor is not None and group.anchor.op in SIDE_OUTPUTS | SPLITS:
            later = [t for t in group.anchor.outputs[1:] if t]
            side.update((t, step) for t in later)
            if group.anchor.op in SIDE_OUTPUTS:
                recurrent.update(later)
    names += list(side)
    names = list(dict.fromkeys(names))
    internal = [t for t in names if t not in io.inputs and t not in io.outputs]
    candidates = [t for t in internal if t not in recurrent]
    flexible = {t for t in candidates if _flexible(t, graph, groups, io)}
    if not blocked:
        # Then the full-size binary operands of groups that write channels-last: a blocked
        # operand would have to match the block oneDNN picks for the output.
        known = frozenset(flexible)
        flexible |= {t for t in candidates if t not in known
                     and _flexible(t, graph, groups, io, operand_into=known)}

    def size(tensor: str) -> int:
        if tensor in flexible:
            return flexible_bytes(graph.type_of(tensor).shape, blocked)
        return graph.type_of(tensor).nbytes

    in_place = _in_place(graph, groups, flexible)
    plan = plan_groups(graph, groups, io, size, aliases=in_place, side_outputs=side)
    c_names = Names()
    entries = []
    for name in names:
        shape = graph.type_of(name).shape
        enum = f"{region.id}_{c_names(name)}"
        if name in io.inputs:
            entry = TensorEntry(name, "in", io.inputs.index(name), False, 0, 0, shape, enum)
        elif name in io.outputs:
            entry = TensorEntry(name, "out", io.outputs.index(name), False, 0, 0, shape, enum)
        else:
            entry = TensorEntry(name, "internal", -1, name in flexible, plan.offsets[name],
                                size(name), shape, enum)
        entries.append(entry)
    return RegionLayout(region, io, groups, tuple(entries), plan, tuple(sorted(in_place.items())))
