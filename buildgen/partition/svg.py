"""An SVG drawing of a partitioned graph: nodes coloured by backend, regions outlined.

Regions are stacked in execution order, each a box holding its nodes in layers (a node
sits one layer below the latest of its producers in the region), so a region's outline
never has to cross another's. Data edges are drawn between nodes; hovering a node shows
its name, op and shapes (an SVG <title>, no script). Plain text: deterministic bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from buildgen.ir import Graph
from buildgen.partition.model import Partition

NODE_W, NODE_H = 168, 34
GAP_X, GAP_Y = 16, 22
PAD, HEADER = 12, 26
PALETTE = ("#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc", "#fc9272", "#fdd0a2", "#c7e9c0")
HOST_COLOUR = "#d9d9d9"


def colours(backends: Sequence[str], host: str) -> dict[str, str]:
    """A fixed colour per backend: the host grey, the others by their priority order."""
    out, others = {}, [b for b in backends if b != host]
    for i, kind in enumerate(others):
        out[kind] = PALETTE[i % len(PALETTE)]
    out[host] = HOST_COLOUR
    return out


@dataclass(frozen=True)
class _Box:
    x: int
    y: int
    w: int
    h: int


def _layers(graph: Graph, nodes: Sequence[str]) -> list[list[str]]:
    members = set(nodes)
    depth: dict[str, int] = {}
    for name in nodes:
        preds = [graph.producer(t) for t in graph.node(name).inputs if t]
        inside = [depth[p.name] + 1 for p in preds if p is not None and p.name in members]
        depth[name] = max(inside, default=0)
    rows: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for name in nodes:
        rows[depth[name]].append(name)
    return rows


def _shapes(graph: Graph, names: Sequence[str]) -> str:
    return ", ".join(f"{t} {list(graph.type_of(t).shape)}" for t in names if t)


def _trim(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def render_svg(graph: Graph, partition: Partition, backends: Sequence[str], host: str) -> str:
    palette = colours(backends, host)
    boxes: dict[str, _Box] = {}
    regions: list[tuple[str, _Box, str]] = []
    y = PAD + 30  # room for the legend
    width = 0
    for region in partition.regions:
        rows = _layers(graph, region.nodes)
        inner_w = max(len(r) for r in rows) * (NODE_W + GAP_X) - GAP_X
        top = y + HEADER
        for i, row in enumerate(rows):
            for j, name in enumerate(row):
                boxes[name] = _Box(PAD * 2 + j * (NODE_W + GAP_X),
                                   top + i * (NODE_H + GAP_Y), NODE_W, NODE_H)
        h = HEADER + len(rows) * (NODE_H + GAP_Y) - GAP_Y + PAD
        outline = _Box(PAD, y, max(inner_w + 2 * PAD, 360), h)
        regions.append((region.id, outline, region.target))
        width = max(width, outline.x + outline.w + PAD)
        y += h + GAP_Y
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" '
        f'viewBox="0 0 {width} {y}" font-family="sans-serif" font-size="11">',
        f"<title>{escape(partition.model)} for target {escape(partition.target)}</title>",
    ]
    x = PAD
    for kind in backends:  # the legend, in priority order
        out.append(f'<rect x="{x}" y="{PAD}" width="14" height="14" fill="{palette[kind]}" '
                   'stroke="#333"/>')
        out.append(f'<text x="{x + 18}" y="{PAD + 11}">{escape(kind)}</text>')
        x += 30 + 7 * len(kind)
    by_id = {r.id: r for r in partition.regions}
    for rid, box, kind in regions:
        why = by_id[rid].reason
        out.append(f'<g class="region" id={quoteattr(rid)}><title>{escape(rid)} on '
                   f'{escape(kind)}: {escape(why)}</title>')
        out.append(f'<rect x="{box.x}" y="{box.y}" width="{box.w}" height="{box.h}" rx="6" '
                   f'fill="none" stroke="{palette[kind]}" stroke-width="3"/>')
        label = f"{rid} · {kind} · {_trim(why, 60)}"
        out.append(f'<text x="{box.x + 8}" y="{box.y + 17}" font-weight="bold">'
                   f"{escape(label)}</text></g>")
    for node in graph.nodes:  # edges under the nodes
        b = boxes[node.name]
        for t in node.inputs:
            producer = graph.producer(t) if t else None
            if producer is None:
                continue
            a = boxes[producer.name]
            if b.y - (a.y + a.h) > PAD + GAP_Y + HEADER:
                # It skips over nodes: around their right side, so it stays visible.
                x1, y1, x2, y2 = a.x + a.w, a.y + a.h // 2, b.x + b.w, b.y + b.h // 2
                bend = max(x1, x2) + 24 + (b.y - a.y) // 40
                path = f"M{x1},{y1} C{bend},{y1} {bend},{y2} {x2},{y2}"
            else:
                x1, y1, x2, y2 = a.x + a.w // 2, a.y + a.h, b.x + b.w // 2, b.y
                mid = (y1 + y2) // 2
                path = f"M{x1},{y1} C{x1},{mid} {x2},{mid} {x2},{y2}"
            out.append(f'<path d="{path}" fill="none" stroke="#555" stroke-width="1.2"/>')
    owner = {n: r.target for r in partition.regions for n in r.nodes}
    for node in graph.nodes:
        b = boxes[node.name]
        tip = (f"{node.name} ({node.op}) on {owner[node.name]}\n"
               f"in: {_shapes(graph, node.inputs)}\nout: {_shapes(graph, node.outputs)}")
        out += [
            f"<g class=\"node\"><title>{escape(tip)}</title>",
            f'<rect x="{b.x}" y="{b.y}" width="{b.w}" height="{b.h}" rx="4" '
            f'fill="{palette[owner[node.name]]}" stroke="#333"/>',
            f'<text x="{b.x + 6}" y="{b.y + 14}" font-weight="bold">{escape(node.op)}</text>',
            f'<text x="{b.x + 6}" y="{b.y + 27}" fill="#333">{escape(_trim(node.name))}</text>',
            "</g>",
        ]
    out.append("</svg>")
    return "\n".join(out) + "\n"
