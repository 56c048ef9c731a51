"""Which tensors cross between the host and a device, and when.

A tensor lives first where it is made: on the host for a graph input, on its producer
region's device otherwise (weights are everywhere: each device gets its own copy at create
time, so they never cross). A region on another device that reads it needs a copy there,
made once, before the first such region; a graph output made on a device is copied back to
the caller's buffer after the last region. The executor moves exactly these, and the cost
policy charges them (buildgen.partition.cost.search) by the same rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from buildgen.ir import Graph
from buildgen.partition.boundaries import region_io
from buildgen.partition.model import Region, Transfer
from buildgen.targets import get_kind
from buildgen.targets.kinds import HOST_DEVICE


def region_device(region: Region) -> str:
    """The device type a region runs on: its target kind's."""
    return get_kind(region.target).device


def plan_transfers(graph: Graph, regions: Sequence[Region]) -> tuple[Transfer, ...]:
    """The copies running `regions` in order needs, in the order they happen."""
    home: dict[str, str] = {name: HOST_DEVICE for name in graph.input_names}
    present: set[tuple[str, str]] = {(name, HOST_DEVICE) for name in graph.input_names}
    transfers: list[Transfer] = []
    for region in regions:
        device = region_device(region)
        io = region_io(graph, region)
        for tensor in io.inputs:
            if (tensor, device) not in present:
                transfers.append(Transfer(tensor, home[tensor], device, region.id))
                present.add((tensor, device))
        for tensor in (*io.outputs, *io.internal):
            home[tensor] = device
            present.add((tensor, device))
    for tensor in graph.output_names:
        if tensor in home and (tensor, HOST_DEVICE) not in present:
            transfers.append(Transfer(tensor, home[tensor], HOST_DEVICE, ""))
            present.add((tensor, HOST_DEVICE))
    return tuple(transfers)
