"""The SVG drawing and the HTML page of a partition, on a hand-built graph."""

import xml.etree.ElementTree as ET

from partition_helpers import composite, graph

from buildgen.ir import Node
from buildgen.partition import partition_graph
from buildgen.partition.explain import explain, render_text
from buildgen.partition.html import render_html
from buildgen.partition.svg import HOST_COLOUR, colours, render_svg

SVG = "{http://www.w3.org/2000/svg}"


def _case():
    g = graph(
        [
            Node("mm<1>", "MatMul", ("x", "w"), ("h",)),
            Node("relu&", "Relu", ("h",), ("r",)),
            Node("exp", "Exp", ("r",), ("e",)),
            Node("sub", "Sub", ("e", "r"), ("y",)),
        ],
        {"x": (2, 4), "w": (4, 4), "h": (2, 4), "r": (2, 4), "e": (2, 4), "y": (2, 4)},
        weights=("w",),
    )
    target = composite("tgemm", "tvec")
    return g, target, partition_graph(g, target, "m", "d")


def test_the_svg_outlines_each_region_and_colours_nodes_by_backend(plugin):
    g, target, p = _case()
    svg = render_svg(g, p, target.backends, target.host_kind)
    root = ET.fromstring(svg)  # well-formed, names with < and & escaped
    regions = root.findall(f"{SVG}g[@class='region']")
    assert [r.get("id") for r in regions] == [r.id for r in p.regions]
    nodes = root.findall(f"{SVG}g[@class='node']")
    palette = colours(target.backends, target.host_kind)
    owner = {n: r.target for r in p.regions for n in r.nodes}
    for node, element in zip(g.nodes, nodes, strict=True):
        assert element.find(f"{SVG}rect").get("fill") == palette[owner[node.name]]
        assert element.find(f"{SVG}title").text.startswith(f"{node.name} ({node.op})")
    assert palette["c"] == HOST_COLOUR
    # One path per data edge between nodes: h, r (twice), e.
    assert len(root.findall(f"{SVG}path")) == 4


def test_the_page_embeds_the_drawing_and_the_explanation_and_is_deterministic(plugin):
    g, target, p = _case()
    svg = render_svg(g, p, target.backends, target.host_kind)
    expl = explain(g, target, p)
    page = render_html(expl, svg, target.host_kind)
    assert svg in page and "<script" not in page
    assert "mm&lt;1&gt;" in page and "no tvec pattern has Exp" in page
    assert page == render_html(explain(g, target, p), svg, target.host_kind)
    text = render_text(expl)
    assert "r0  tgemm (accelerator), 2 node(s)\n    why: pattern tgemm.gemm_bias_act" in text
