"""A user's own partition: a partition file, or a Python step, handed back to the build.

A partition file has the format of partition.json (docs/partitioning.md, "The partition
file"), where only `format`, `version` and each region's `nodes` are required. A region
with a `target` is kept exactly as written; a region without one, and any node no region
names, is left to the policy. A step is `module:function`, called as
function(graph, target, partition) -> Partition after the policy; its regions are treated
the same way.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from buildgen.backends.registry import get_backend
from buildgen.errors import BuildgenError, Diagnostic, error
from buildgen.ir import Graph
from buildgen.limits import read_json
from buildgen.partition.convexity import NodeGraph
from buildgen.partition.model import Partition, Region
from buildgen.partition.pins import HOST, PinnedNode
from buildgen.partition.regions import Unit
from buildgen.partition.serialize import PARTITION_FORMAT
from buildgen.targets import ResolvedTarget

Step = Callable[[Graph, ResolvedTarget, Partition], Partition]


def load_user_partition(path: str | Path) -> tuple[Region, ...]:
    """The regions of a user's partition file (targets may be empty)."""
    doc = read_json(Path(path), "the partition file")
    if not isinstance(doc, dict) or doc.get("format") != "buildgen-partition":
        raise error(f"{path}: not a buildgen partition file",
                    hint='it starts {"format": "buildgen-partition", "version": 1, ...}')
    if doc.get("version") != PARTITION_FORMAT:
        raise error(f"{path}: partition file version {doc.get('version')!r}; this buildgen "
                    f"reads version {PARTITION_FORMAT}")
    regions = []
    origin = f"partition file {Path(path).name}"
    for index, item in enumerate(doc.get("regions", [])):
        nodes = item.get("nodes") if isinstance(item, dict) else None
        if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
            raise error(f"{path}: regions[{index}]: 'nodes' must be a list of node names")
        regions.append(Region(
            id=str(item.get("id") or f"regions[{index}]"),
            target=str(item.get("target") or ""),
            nodes=tuple(nodes),
            reason=_set_by(origin, str(item.get("reason") or "")),
            pattern=str(item.get("pattern") or ""),
        ))
    return tuple(regions)


def _set_by(origin: str, reason: str) -> str:
    return f"set by {origin} ({reason})" if reason else f"set by {origin}"


def load_step(reference: str, search_path: Sequence[str] = ()) -> Step:
    """The function `module:function`, importing with `search_path` (the manifest's folder)
    first on sys.path."""
    module_name, sep, attr = reference.partition(":")
    if not sep or not module_name or not attr:
        raise error(f"partition step {reference!r}: expected 'module:function'")
    added = [p for p in search_path if p not in sys.path]
    sys.path[:0] = added
    try:
        function = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise error(f"partition step {reference!r} cannot be loaded: {exc}") from exc
    finally:
        for p in added:
            sys.path.remove(p)
    if not callable(function):
        raise error(f"partition step {reference!r} is not a function")
    step: Step = function
    return step


def run_step(step: Step, reference: str, graph: Graph, target: ResolvedTarget,
             partition: Partition) -> tuple[Region, ...]:
    result = step(graph, target, partition)
    if not isinstance(result, Partition):
        raise error(f"partition step {reference!r} returned {type(result).__name__}, "
                    "not a buildgen.partition.Partition")
    before = {(r.target, r.nodes): r for r in partition.regions}
    # A region the step left as it was keeps its reason; the rest name the step.
    origin = f"step {reference}"
    return tuple(
        r if (r.target, r.nodes) in before
        else Region(r.id, r.target, r.nodes, _set_by(origin, r.reason), r.pattern)
        for r in result.regions
    )


def _names_problems(
    region: Region, where: str, ng: NodeGraph, names: list[str], owner: dict[str, str]
) -> list[str]:
    problems = []
    for name in region.nodes:
        if name not in ng.index:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"{where}: no node {name!r} in the model{hint}")
        elif name in owner:
            problems.append(f"{where}: node {name!r} is already in region {owner[name]}")
        else:
            owner[name] = region.id
    return problems


def _target_problems(
    graph: Graph, region: Region, kind: str, where: str, pins: dict[str, PinnedNode]
) -> list[str]:
    problems = []
    for name in region.nodes:
        node = graph.node(name)
        reason = get_backend(kind).decline_reason(node, graph)
        if reason is not None:
            problems.append(f"{where}: backend {kind} cannot run node {name!r} "
                            f"(op {node.op}): {reason}")
        pinned = pins.get(name)
        if pinned is not None and pinned.kind != kind:
            problems.append(f"{where} puts node {name!r} on {kind}, but "
                            f"{pinned.pin.describe()} puts it on {pinned.kind}")
    return problems


def fixed_units(
    graph: Graph, ng: NodeGraph, target: ResolvedTarget, regions: Sequence[Region],
    origin: str, pins: dict[str, PinnedNode],
) -> list[Unit]:
    """Units for the regions that set a target, every region checked against the graph
    (and those with a target against the target); all problems are raised together."""
    problems: list[str] = []
    names = [n.name for n in graph.nodes]
    owner: dict[str, str] = {}
    units: list[Unit] = []
    for region in regions:
        where = f"{origin}: region {region.id}"
        kind = target.host_kind if region.target == HOST else region.target
        found = _names_problems(region, where, ng, names, owner)
        if kind and kind not in target.backends:
            found.append(f"{where}: target {target.name!r} has no backend {kind!r}; its "
                         f"backends are {', '.join(target.backends)}")
        problems += found
        if found or not kind or not region.nodes:
            continue  # a region without a target only gives its nodes back to the policy
        problems += _target_problems(graph, region, kind, where, pins)
        positions = ng.positions(region.nodes)
        if not ng.is_convex(positions):
            problems.append(f"{where}: its nodes are not convex: a path leaves the region "
                            "and comes back, so it could not run as one step")
        units.append(Unit(kind, positions, (region.reason or f"set by {origin}",),
                          (region.pattern,), fixed=True))
    if problems:
        raise BuildgenError([Diagnostic(p) for p in problems])
    return units
