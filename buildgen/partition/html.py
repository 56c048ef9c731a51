"""report.html: the partition drawn (inline SVG) and explained, in one self-contained page,
and the model's last build drawn on a timeline (timeline.py).

No script and nothing fetched from the network: the page opens from the build folder as
it is, and the same inputs (the same .ninja_log included) give the same bytes.
"""

from __future__ import annotations

from html import escape

from buildgen.partition.explain import Explanation
from buildgen.partition.svg import colours

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
td, th { border: 1px solid #bbb; padding: 4px 8px; vertical-align: top; text-align: left; }
th { background: #f0f0f0; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; border: 1px solid #333;
          vertical-align: middle; margin-right: 4px; }
details { margin: 0.2em 0; }
.said { color: #555; font-size: 90%; }
svg.timeline { max-width: 100%; height: auto; }
"""


def _region_rows(expl: Explanation, palette: dict[str, str]) -> list[str]:
    rows = []
    for r in expl.regions:
        ops: dict[str, int] = {}
        for n in r.nodes:
            ops[n.op] = ops.get(n.op, 0) + 1
        op_text = ", ".join(f"{op}×{k}" for op, k in ops.items())
        notes = []
        for n in r.nodes:
            if n.declined:
                said = "<br>".join(f"{escape(k)}: {escape(v)}" for k, v in n.declined)
                notes.append(f"<details><summary>{escape(n.name)} ({escape(n.op)})</summary>"
                             f"<div class=\"said\">{said}</div></details>")
        rows.append(
            f"<tr><td>{escape(r.id)}</td><td><span class=\"swatch\" style=\"background:"
            f"{palette[r.target]}\"></span>{escape(r.target)} ({escape(r.role)})</td>"
            f"<td>{len(r.nodes)}</td><td>{escape(op_text)}</td>"
            f"<td>{escape(r.reason)}{''.join(notes)}</td></tr>"
        )
    return rows


def render_html(expl: Explanation, svg: str, host: str, timeline: str | None = None) -> str:
    """The page; `timeline` is the build timeline section's body (timeline.py's paragraph
    and drawing), None for a page without one."""
    palette = colours(expl.backends, host)
    title = f"{expl.model} for target {expl.target}"
    lines = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}: partition</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p>{len(expl.regions)} region(s). Backends in priority order: "
        f"{escape(' > '.join(expl.backends))}. Each region runs on one backend; the host "
        "runs what no accelerator took (open a node to see what each accelerator said).</p>",
        "<table><tr><th>region</th><th>backend</th><th>nodes</th><th>ops</th>"
        "<th>why</th></tr>",
        *_region_rows(expl, palette),
        "</table>",
        "<h2>Graph</h2>",
        "<p>Regions in execution order, outlined in their backend's colour; hover a node "
        "for its name and shapes. The same drawing is in partition.svg.</p>",
        svg,
    ]
    if timeline is not None:
        lines += [
            "<h2>Build timeline</h2>",
            "<p>The model's actions as ninja ran them: one bar per action, coloured by "
            "stage; actions that ran at once are on different lanes.</p>",
            timeline,
        ]
    lines += [
        "</body></html>",
    ]
    return "\n".join(lines) + "\n"
