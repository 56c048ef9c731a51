"""report.html's build timeline: a model's actions from ninja's `.ninja_log`, drawn as
inline SVG.

One bar per action (an edge: all the outputs it wrote), on lanes so that actions running
at once sit on different lanes, coloured and labelled by buildgen stage, with the action's
outputs and times as a <title> tooltip. The log is read by the parsers `buildgen trace`
uses (buildgen/ninja/trace.py); the run shown is the newest run of the log that ran any
action of the model for the target, so a later build with nothing to do (or of another
model) leaves the drawing as it was. Plain text from the log alone: deterministic bytes.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from html import escape

from buildgen.ninja.trace import (
    STAGE_COLOURS,
    Job,
    NinjaLog,
    assign_lanes,
    jobs_of,
    split_builds,
    stage_of,
)

# Fill per stage, in the order of the stages (trace.py's STAGE_COLOURS); the legend lists
# the stages present in that order.
STAGE_FILLS = {
    "gen": "#bdbdbd",
    "import": "#6baed6",
    "partition": "#9e9ac8",
    "codegen": "#74c476",
    "executor": "#fdd049",
    "compile": "#fd8d3c",
    "link": "#e7969c",
    "report": "#9edae5",
    "other": "#969696",
}
assert list(STAGE_FILLS) == list(STAGE_COLOURS)

LEFT, RIGHT, TOP = 64, 16, 48
PLOT_W = 960
LANE_H, BAR_H = 26, 20
CHAR_W = 7  # an estimate of one character's width at font-size 11, to fit labels in bars


@dataclass(frozen=True)
class Timeline:
    model: str
    target: str
    jobs: tuple[Job, ...]  # the model's actions of one run, by start, lane, outputs
    lanes: dict[Job, int]
    run: int  # which ninja run of the log, 1 = oldest
    runs: int  # how many runs the log holds


def belongs(output: str, model: str, target: str) -> bool:
    """Whether `output` is a file of the model for the target: its import (the model's
    own folder) or anything under <model>/<target>/ (layout.py)."""
    parts = output.split("/")
    return parts[0] == model and (len(parts) == 2 or (len(parts) > 2 and parts[1] == target))


def model_timeline(log: NinjaLog, model: str, target: str) -> Timeline:
    """The model's actions in the newest run of the log that ran any of them (none: an
    empty timeline)."""
    builds = split_builds(log.entries)
    for index in range(len(builds) - 1, -1, -1):
        jobs = [job for job in jobs_of(builds[index])
                if any(belongs(o, model, target) for o in job.outputs)]
        if jobs:
            lanes = assign_lanes(jobs)
            ordered = tuple(sorted(jobs, key=lambda j: (j.start_ms, lanes[j], j.outputs)))
            return Timeline(model, target, ordered, lanes, index + 1, len(builds))
    return Timeline(model, target, (), {}, 0, len(builds))


def shown(text: str) -> str:
    """A log- or model-supplied string as HTML/SVG text or attribute value: characters
    that would not show as themselves (controls, bidi overrides and other format
    characters, lone surrogates from undecodable bytes) become visible \\uXXXX, and the
    rest is escaped, quotes included."""
    out = []
    for ch in text:
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            code = ord(ch)
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    return escape("".join(out), quote=True)


def _step(span_ms: int) -> int:
    """A round tick interval (1, 2 or 5 times a power of ten ms) giving at most 10 ticks."""
    scale = 1
    while True:
        for factor in (1, 2, 5):
            if span_ms / (factor * scale) <= 10:
                return factor * scale
        scale *= 10


def _tick_label(ms: int, step: int) -> str:
    if step >= 1000:
        return f"{ms / 1000:g} s"
    return f"{ms} ms"


def render_timeline_svg(timeline: Timeline) -> str:
    """The SVG (empty string when the timeline has no action)."""
    jobs = timeline.jobs
    if not jobs:
        return ""
    t0 = min(j.start_ms for j in jobs)
    span = max(max(j.end_ms for j in jobs) - t0, 1)
    lanes = max(timeline.lanes.values()) + 1
    width = LEFT + PLOT_W + RIGHT
    height = TOP + lanes * LANE_H + 8

    def x_of(ms: int) -> float:
        return LEFT + (ms - t0) * PLOT_W / span

    out = [
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" '
        'font-size="11">',
        f"<title>build timeline of {shown(timeline.model)} for target "
        f"{shown(timeline.target)}</title>",
    ]
    x = LEFT
    stages = {stage_of(j.outputs[0]) for j in jobs}
    for stage in STAGE_FILLS:  # the legend, in build order
        if stage in stages:
            out.append(f'<rect x="{x}" y="4" width="14" height="14" '
                       f'fill="{STAGE_FILLS[stage]}" stroke="#333"/>')
            out.append(f'<text x="{x + 18}" y="15">{stage}</text>')
            x += 30 + CHAR_W * len(stage)
    step = _step(span)
    for tick in range(0, span + 1, step):  # the time axis, from the first action's start
        tx = x_of(t0 + tick)
        out.append(f'<line x1="{tx:.1f}" y1="{TOP - 8}" x2="{tx:.1f}" '
                   f'y2="{height - 8}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{tx:.1f}" y="{TOP - 12}" text-anchor="middle" fill="#555">'
                   f"{_tick_label(tick, step)}</text>")
    for lane in range(lanes):
        y = TOP + lane * LANE_H
        out.append(f'<text x="{LEFT - 8}" y="{y + BAR_H // 2 + 4}" text-anchor="end" '
                   f'fill="#555">lane {lane}</text>')
    for job in jobs:
        stage = stage_of(job.outputs[0])
        x1 = x_of(job.start_ms)
        w = max(x_of(job.end_ms) - x1, 2.0)  # an action under a pixel stays visible
        y = TOP + timeline.lanes[job] * LANE_H
        tip = "\n".join([*job.outputs, f"{stage}: {job.start_ms}–{job.end_ms} ms of the "
                         f"ninja run ({job.end_ms - job.start_ms} ms)"])
        out.append(f'<g class="action"><title>{shown(tip)}</title>')
        out.append(f'<rect class="bar" x="{x1:.1f}" y="{y}" width="{w:.1f}" '
                   f'height="{BAR_H}" fill="{STAGE_FILLS[stage]}" stroke="#333" '
                   'stroke-width="0.5"/>')
        # The label: the stage, and the first output's file name when that fits too.
        named = f"{stage} {job.outputs[0].rpartition('/')[2]}"
        label = next((t for t in (named, stage) if w >= CHAR_W * len(t) + 8), None)
        if label is not None:
            out.append(f'<text x="{x1 + 4:.1f}" y="{y + BAR_H // 2 + 4}">{shown(label)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def describe(timeline: Timeline, log_name: str) -> str:
    """The paragraph above the drawing (HTML)."""
    if not timeline.jobs:
        return (f"<p>No action of this model for this target in {shown(log_name)}: "
                "nothing to draw.</p>")
    wall = max(j.end_ms for j in timeline.jobs) - min(j.start_ms for j in timeline.jobs)
    lanes = max(timeline.lanes.values()) + 1
    return (f"<p>{len(timeline.jobs)} action(s) of this model in ninja run "
            f"{timeline.run} of {timeline.runs} in {shown(log_name)} (the newest run that "
            f"ran any), {wall} ms from the first start to the last end, at most {lanes} "
            "at once. Hover a bar for the files the action wrote.</p>")

