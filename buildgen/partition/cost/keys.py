"""The key of a tuning record: what determines a candidate kernel's run time.

    backend   the kind that runs it
    pattern   the pattern-table entry ("openblas.matmul_bias_act"), "" for the host's kernels
    ops       each node's op and attributes, in order
    shapes    dtype and shape of its inputs (by first use), weights and outputs
    dtype     the dtype of its first output
    options   the backend's attributes that can change its code or flags (all but `none`)

Nothing names a model, a target or a node, so one record serves every model and target
holding the same kernel: it is measured once.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from buildgen.ir import Graph, Node
from buildgen.ir.graph import AttrValue
from buildgen.partition.boundaries import region_io
from buildgen.partition.model import Region
from buildgen.targets import ResolvedTarget, get_kind


def _attr(value: AttrValue) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, tuple):
        return [_attr(v) for v in value]
    return value


def _tensor(graph: Graph, name: str) -> list[Any]:
    t = graph.type_of(name)
    return [t.dtype.value, list(t.shape)]


def backend_options(target: ResolvedTarget, kind: str) -> dict[str, Any]:
    """The attributes of `kind` in `target` that can change what runs: all but `none` ones,
    a symbolic value as what it resolves to for one kernel (`x-key-as`: onednn's
    `activation_layout: auto` keys as channels_last, so records measured before `auto`
    became the default still match). Needs the full target (target.json), not the
    partition's view of it."""
    attributes = {a.name: a for a in get_kind(kind).attributes}
    attrs = target.instance(kind).as_dict()
    return {
        k: attributes[k].key_value(v) for k, v in sorted(attrs.items())
        if k in attributes and attributes[k].affects != "none"
    }


def kernel_key(
    graph: Graph, nodes: Sequence[Node], backend: str, pattern: str,
    options: Mapping[str, Any],
) -> dict[str, Any]:
    io = region_io(graph, Region("k", backend, tuple(n.name for n in nodes)))
    weights = list(dict.fromkeys(t for n in nodes for t in n.inputs if t and graph.is_weight(t)))
    first_output = nodes[0].outputs[0] if not io.outputs else io.outputs[0]
    return {
        "backend": backend,
        "pattern": pattern,
        "ops": [[n.op, {k: _attr(v) for k, v in n.attrs}] for n in nodes],
        "shapes": {
            "inputs": [_tensor(graph, t) for t in io.inputs],
            "weights": [_tensor(graph, t) for t in weights],
            "outputs": [_tensor(graph, t) for t in io.outputs],
        },
        "dtype": graph.type_of(first_output).dtype.value,
        "options": dict(options),
    }


def key_text(key: Mapping[str, Any]) -> str:
    """The canonical text of a key: records are looked up and sorted by it."""
    return json.dumps(key, sort_keys=True, separators=(",", ":"))


def key_digest(key: Mapping[str, Any]) -> str:
    return hashlib.sha256(key_text(key).encode()).hexdigest()[:16]
