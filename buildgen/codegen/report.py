"""report.json / report.md: what went where, and what memory one model instance takes."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from buildgen import __version__
from buildgen.backends.registry import get_backend
from buildgen.codegen.executor import boundary_bytes, device_boundary_bytes
from buildgen.codegen.isa import ONE_ISA, IsaPlan
from buildgen.codegen.markdown import code, plain
from buildgen.ir import Graph, Value
from buildgen.partition.cost.records import Records
from buildgen.partition.model import Partition
from buildgen.targets import ResolvedTarget, get_kind
from buildgen.targets.kinds import HOST_DEVICE

REPORT_FORMAT = 1


def _summaries(graph: Graph, partition: Partition, weights: Mapping[str, np.ndarray],
               options: Mapping[str, Mapping[str, object]], records: Records | None,
               ) -> dict[str, Any]:
    """The memory summary of each backend that has one (kind -> summary), planned with the
    options (kind -> its options file), and for a kind that reads them the tuning records,
    that its codegen gets."""
    found = {}
    for kind in partition.backends:
        summary = getattr(get_backend(kind), "plan_summary", None)
        if summary is None:
            continue
        tuned = {"records": records} if records is not None and get_kind(kind).reads_records \
            else {}
        found[kind] = summary(graph, partition, options.get(kind, {}), weights, **tuned)
    return found


def _scratch_bytes(summaries: Mapping[str, Any], device: bool = False) -> int:
    """Backends share one scratch area (regions run one at a time): the largest need wins.
    Host backends share the host arena's, device backends the device arena's."""
    return max([0, *(s.scratch_bytes for kind, s in summaries.items()
                     if (get_kind(kind).device != HOST_DEVICE) == device)])


def _cpu_isa(isa: IsaPlan) -> dict[str, Any]:
    return {"variants": {kind: list(levels) for kind, levels in isa.variants},
            "pinned": isa.pinned or None}


def _intermediate_bytes(graph: Graph) -> int:
    io = set(graph.input_names) | set(graph.output_names)
    return sum(v.type.nbytes for v in graph.values if v.name not in io)


def _tensor(v: Value) -> dict[str, Any]:
    return {"name": v.name, "dtype": v.type.dtype.value, "shape": list(v.type.shape)}


def build_report(
    model: str,
    target: ResolvedTarget,
    graph: Graph,
    partition: Partition,
    weights: Mapping[str, np.ndarray],
    isa: IsaPlan = ONE_ISA,
    options: Mapping[str, Mapping[str, object]] | None = None,
    records: Records | None = None,
) -> dict[str, Any]:
    """`options` (kind -> its options file) and `records` (the model's tuning records): what
    the backends' codegen reads, so that memory is planned as they plan it."""
    summaries = _summaries(graph, partition, weights, options or {}, records)
    arena = boundary_bytes(graph, partition) + _scratch_bytes(summaries)
    packed = sum(getattr(s, "packed_bytes", 0) for kind, s in summaries.items()
                 if get_kind(kind).device == HOST_DEVICE)
    device: dict[str, Any] = {}
    if any(get_kind(r.target).device != HOST_DEVICE for r in partition.regions):
        device["device_arena_bytes"] = device_boundary_bytes(graph, partition) + _scratch_bytes(
            summaries, device=True)
        device["transfers"] = [
            {"tensor": t.tensor, "from": t.source, "to": t.dest, "before": t.before,
             "bytes": graph.type_of(t.tensor).nbytes}
            for t in partition.transfers
        ]
    regions = []
    for region in partition.regions:
        ops = Counter(graph.node(n).op for n in region.nodes)
        regions.append(
            {
                "id": region.id,
                "target": region.target,
                "reason": region.reason,
                "pattern": region.pattern,
                "nodes": len(region.nodes),
                "ops": dict(sorted(ops.items())),
            }
        )
    return {
        "format": "buildgen-report",
        "version": REPORT_FORMAT,
        "buildgen": __version__,
        "model": model,
        "target": target.name,
        "source": graph.source,
        "opset": graph.opset,
        "inputs": [_tensor(v) for v in graph.inputs],
        "outputs": [_tensor(v) for v in graph.outputs],
        "nodes": len(graph.nodes),
        "weights_bytes": sum(w.type.nbytes for w in graph.weights),
        "arena_bytes": arena,
        "packed_weights_bytes": packed,
        "cpu_isa": _cpu_isa(isa),
        "intermediate_bytes": _intermediate_bytes(graph),
        "regions": regions,
        **device,
    }


def _markdown(report: dict[str, Any]) -> str:
    inter = report["intermediate_bytes"]
    share = f"{100 * report['arena_bytes'] / inter:.0f}%" if inter else "n/a"
    lines = [
        f"# {report['model']} for target {report['target']}",
        "",
        f"Source {code(str(report['source']))} (opset {report['opset']}), {report['nodes']} nodes, "
        f"built by buildgen {report['buildgen']}.",
        "",
        "## Memory",
        "",
        f"- arena per instance: {report['arena_bytes']:,} bytes ({share} of the "
        f"{inter:,} bytes all intermediate tensors would take unshared)",
        f"- weights linked into the library: {report['weights_bytes']:,} bytes",
        *([f"- weights packed at create, per instance: {report['packed_weights_bytes']:,} "
           "bytes"] if report["packed_weights_bytes"] else []),
        *([f"- device arena per instance: {report['device_arena_bytes']:,} bytes (and a device "
           f"copy of the weights)"] if "device_arena_bytes" in report else []),
        *(f"- copied {t['from']} -> {t['to']} "
          f"{'before ' + t['before'] if t['before'] else 'after the last region'}: "
          f"{code(t['tensor'])}, {t['bytes']:,} bytes" for t in report.get("transfers", [])),
        "",
        "## Instruction set",
        "",
        *_isa_lines(report["cpu_isa"]),
        "",
        "## Regions",
        "",
        "| region | backend | nodes | ops | why |",
        "|---|---|---|---|---|",
    ]
    for r in report["regions"]:
        ops = ", ".join(f"{op}×{n}" for op, n in r["ops"].items())
        lines.append(f"| {r['id']} | {r['target']} | {r['nodes']} | {ops} | {plain(r['reason'])} |")
    lines += ["", "## Inputs and outputs", ""]
    for kind in ("inputs", "outputs"):
        for t in report[kind]:
            lines.append(f"- {kind[:-1]} {code(t['name'])}: {t['dtype']}{t['shape']}")
    return "\n".join(lines) + "\n"


def _isa_lines(cpu_isa: dict[str, Any]) -> list[str]:
    lines = [
        f"- {kind}: compiled for {', '.join(levels)}; create runs the best level the CPU "
        "supports (`<model>_cpu_isa` says which; BUILDGEN_MAX_ISA caps it)"
        for kind, levels in cpu_isa["variants"].items()
    ]
    if not lines:
        pinned = cpu_isa["pinned"]
        lines.append(f"- one instruction set: -march={pinned}" if pinned
                     else "- one instruction set: the compiler's default")
    return lines


def write_report(
    model: str,
    target: ResolvedTarget,
    graph: Graph,
    partition: Partition,
    weights: Mapping[str, np.ndarray],
    isa: IsaPlan = ONE_ISA,
    options: Mapping[str, Mapping[str, object]] | None = None,
    records: Records | None = None,
) -> tuple[str, str]:
    report = build_report(model, target, graph, partition, weights, isa, options, records)
    return json.dumps(report, sort_keys=True, indent=1) + "\n", _markdown(report)
