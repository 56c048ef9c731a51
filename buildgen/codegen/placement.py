"""Where the executor keeps each tensor passed between regions: the host arena, the device
arena, or both (a tensor copied across; buildgen.partition.transfers says which).

Steps are region positions; a copy "before region r" happens at r's step and one after the
last region at step len(regions). Each side's buffers live from the step that writes them
(the producer region, or the copy into that side) to the last step that reads them there
(a region, or a copy out), and each side is planned like the host arena always was
(buildgen.codegen.memplan). Graph inputs and outputs are the caller's host buffers, so only
their device copies take arena bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from buildgen.codegen.memplan import Buffer, plan_memory
from buildgen.errors import error
from buildgen.ir import Graph
from buildgen.partition.boundaries import RegionIO, region_io
from buildgen.partition.model import Partition, Transfer
from buildgen.partition.transfers import plan_transfers, region_device
from buildgen.targets.kinds import HOST_DEVICE

CUDA = "cuda"
DEVICES = (HOST_DEVICE, CUDA)  # the device types the executor can drive
# cudaMalloc returns 256-byte aligned memory; keeping device offsets so too lets a device
# module treat every tensor as aligned as a fresh allocation.
DEVICE_ALIGNMENT = 256


@dataclass(frozen=True)
class Placement:
    ios: tuple[RegionIO, ...]
    devices: tuple[str, ...]  # per region, the device type it runs on
    transfers: tuple[Transfer, ...]
    host_offsets: dict[str, int]  # tensor -> host arena offset
    host_total: int
    device_offsets: dict[str, int]  # tensor -> device arena offset
    device_total: int

    @property
    def uses_device(self) -> bool:
        return CUDA in self.devices

    def transfers_before(self, region_id: str) -> tuple[Transfer, ...]:
        return tuple(t for t in self.transfers if t.before == region_id)


class _Lifetimes:
    """First and last step of each tensor's buffer on one side."""

    def __init__(self) -> None:
        self.first: dict[str, int] = {}
        self.last: dict[str, int] = {}

    def write(self, name: str, step: int) -> None:
        self.first.setdefault(name, step)
        self.last[name] = max(self.last.get(name, step), step)

    def read(self, name: str, step: int) -> None:
        self.last[name] = max(self.last.get(name, step), step)

    def buffers(self, graph: Graph, skip: set[str]) -> list[Buffer]:
        return [
            Buffer(name, graph.type_of(name).nbytes, first, self.last[name])
            for name, first in self.first.items()
            if name not in skip
        ]


def plan_placement(graph: Graph, partition: Partition) -> Placement:
    ios = tuple(region_io(graph, r) for r in partition.regions)
    devices = tuple(region_device(r) for r in partition.regions)
    for region, device in zip(partition.regions, devices, strict=True):
        if device not in DEVICES:
            raise error(
                f"region {region.id} runs on device {device!r} ({region.target}); the "
                f"executor drives {', '.join(DEVICES)} regions only"
            )
    transfers = plan_transfers(graph, partition.regions)
    step_of = {r.id: i for i, r in enumerate(partition.regions)}
    end = len(partition.regions)
    sides = {HOST_DEVICE: _Lifetimes(), CUDA: _Lifetimes()}
    for step, (io, device) in enumerate(zip(ios, devices, strict=True)):
        for name in io.inputs:
            sides[device].read(name, step)
        for name in io.outputs:
            sides[device].write(name, step)
    for t in transfers:
        step = step_of[t.before] if t.before else end
        sides[t.source].read(t.tensor, step)
        sides[t.dest].write(t.tensor, step)
    graph_io = set(graph.input_names) | set(graph.output_names)
    on_host = plan_memory(sides[HOST_DEVICE].buffers(graph, graph_io))
    on_device = plan_memory(sides[CUDA].buffers(graph, set()), DEVICE_ALIGNMENT)
    return Placement(ios, devices, transfers, dict(on_host.offsets), on_host.total_bytes,
                     dict(on_device.offsets), on_device.total_bytes)
