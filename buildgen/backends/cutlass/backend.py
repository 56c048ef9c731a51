"""The `cutlass` backend: external codegen for the cuda device from CUTLASS 2.x templates.

generate() writes the model's glue module (cutlass.cu, no CUTLASS headers); with
generate_with_kernels() it also returns the model's instantiation list, which the
manifest's shared-kernels action (buildgen.ninja.shared_modules) turns into kernel shards
compiled once for every model (rules/cutlass.yaml `shared_kernels:`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from buildgen.backends.base import GeneratedSource, require_c_identifier
from buildgen.backends.cutlass import choose as choosing
from buildgen.backends.cutlass.glue import (
    ALIGN,
    ConvState,
    PlannedCall,
    RegionPlan,
    describe_call,
    render_module,
    temp_bytes,
)
from buildgen.backends.cutlass.lower import Call, ConvCall, GemmCall, lower_region
from buildgen.backends.cutlass.patterns import decline_reason
from buildgen.backends.gpu_region import align_up
from buildgen.errors import error
from buildgen.ir import Graph, Node
from buildgen.partition.boundaries import region_io
from buildgen.partition.model import Partition, Region
from buildgen.stages.shared_kernels_stage import LIST_FORMAT, LIST_VERSION

if TYPE_CHECKING:
    import numpy as np

    from buildgen.partition.cost.records import Records



def _scalars(graph: Graph, weights: Mapping[str, np.ndarray] | None) -> dict[str, float]:
    if weights is None:
        return {}
    return {w.name: float(weights[w.name].reshape(-1)[0]) for w in graph.weights
            if w.type.numel == 1 and w.name in weights}


def _choice(call: Call, settings: choosing.Settings, records: Records | None
            ) -> choosing.Choice | None:
    if isinstance(call, GemmCall):
        problem = choosing.gemm_problem(call)
    elif isinstance(call, ConvCall):
        problem = choosing.conv_problem(call)
    else:
        return None
    try:
        return choosing.choose(problem, settings, records)
    except ValueError as exc:
        raise error(f"{exc} (nodes {', '.join(call.nodes)})") from None


def plan_region(graph: Graph, region: Region, settings: choosing.Settings,
                records: Records | None, values: Mapping[str, float] | None) -> RegionPlan:
    """Lower a region, choose each call's kernel, lay out its scratch: tensors passed
    between calls first, then the largest call's temporaries."""
    io = region_io(graph, region)
    calls = lower_region(graph, region.nodes, values)
    offsets: dict[str, int] = {}
    top = 0
    for call in calls:
        if call.output not in io.outputs:
            offsets[call.output] = top
            top += align_up(graph.type_of(call.output).nbytes, ALIGN)
    planned = []
    temps = 0
    for call in calls:
        choice = _choice(call, settings, records)
        size = temp_bytes(call, choice)
        planned.append(PlannedCall(call, choice, top, size))
        temps = max(temps, size)
    return RegionPlan(region.id, io, tuple(planned), offsets, top + temps)


def conv_states(plans: list[RegionPlan]) -> list[ConvState]:
    """Where create puts each convolution's reordered filter and folded bias (in floats,
    64-float aligned)."""
    states, top = [], 0
    for plan in plans:
        for p in plan.calls:
            if isinstance(p.call, ConvCall):
                c = p.call
                bias = top + align_up(c.k * c.c * c.r * c.s, 64)
                states.append(ConvState(c, top, bias))
                top = bias + align_up(c.k, 64)
    return states


def instantiation_list(model: str, partition: Partition, graph: Graph,
                       plans: list[RegionPlan]) -> str:
    """The model's instantiations (template parameters) and where each is used."""
    kernels: dict[str, dict[str, Any]] = {}
    for plan in plans:
        for p in plan.calls:
            if p.choice is None:
                continue
            entry = kernels.setdefault(p.choice.kernel.symbol, {
                "params": p.choice.kernel.params(), "users": []})
            entry["users"].append({
                "model": model, "target": partition.target, "region": plan.id,
                "nodes": list(p.call.nodes), "call": describe_call(graph, p)[1].strip(),
            })
    doc = {"format": LIST_FORMAT, "version": LIST_VERSION, "backend": "cutlass",
           "kernels": [{"name": k, **v} for k, v in sorted(kernels.items())]}
    return json.dumps(doc, sort_keys=True, indent=1) + "\n"


class CutlassBackend:
    kind = "cutlass"

    def decline_reason(self, node: Node, graph: Graph) -> str | None:
        return decline_reason(node, graph)

    def plan(self, graph: Graph, partition: Partition, options: Mapping[str, object],
             weights: Mapping[str, np.ndarray] | None = None, records: Records | None = None
             ) -> list[RegionPlan]:
        try:
            settings = choosing.settings_of(options)
        except ValueError as exc:
            raise error(str(exc), hint="set `sm` on the cutlass target or `arch` on the "
                                       "cuda device") from None
        values = _scalars(graph, weights) if weights is not None else None
        return [plan_region(graph, r, settings, records, values)
                for r in partition.regions_for(self.kind)]

    def generate_with_kernels(
        self, model: str, graph: Graph, partition: Partition, options: Mapping[str, object],
        weights: Mapping[str, np.ndarray] | None = None, records: Records | None = None,
    ) -> tuple[GeneratedSource, str]:
        """The glue module and the instantiation list (shared_kernels' second output)."""
        require_c_identifier(model)
        plans = self.plan(graph, partition, options, weights, records)
        s = choosing.settings_of(options)
        settings = [f"sm {s.sm}", f"math {s.math}",
                    f"split-K {list(s.split_k_slices)}",
                    f"{'first valid' if s.find_first_valid else 'heuristic'} choice",
                    f"{'all' if s.profile_all_alignments else 'widest'} alignments"]
        text = render_module(model, graph, plans, conv_states(plans), settings)
        listing = instantiation_list(model, partition, graph, plans)
        return GeneratedSource("cutlass.cu", "cuda", text), listing

    def generate(
        self, model: str, graph: Graph, partition: Partition, options: Mapping[str, object],
        weights: Mapping[str, np.ndarray] | None = None,
    ) -> GeneratedSource:
        return self.generate_with_kernels(model, graph, partition, options, weights)[0]
