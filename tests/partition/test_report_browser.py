"""`buildgen report`'s page opened in a real browser: headless Chromium (Debian's `chromium`,
which .ci/run installs).

The page must load without a console message (it has no script, so any message at all —
a console.error, an uncaught exception — is a fault), draw one node per graph node of the
partition and one timeline bar per action the model's build logged in .ninja_log, and give
those elements a real size on screen. A screenshot is kept as a test artifact: in
$BUILDGEN_TEST_ARTIFACTS when set, else in the test's tmp_path (its path is printed).

This Chromium (156) prints every console message, whatever its level, to stderr as
`[...:INFO:CONSOLE:<line>] "<text>", source: <url> (<line>)` under
`--enable-logging=stderr --v=0`; uncaught exceptions print the same way ("Uncaught
Error: ..."). test_console_check_sees_planted_errors proves the check can fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_partition_cli import _project

from buildgen.cli import main

INSTALL_HINT = "install Debian's chromium (apt-get install chromium)"
WINDOW = (1280, 2000)


def find_chromium() -> str | None:
    return shutil.which("chromium")


def require_chromium() -> str:
    """Skip when chromium is missing, but fail when env CI is set: .ci/run installs it
    there, so a missing chromium means a broken CI (as tests/cache does for nginx)."""
    found = find_chromium()
    if found is None:
        message = f"this test needs headless chromium; {INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must have it: .ci/run installs it)")
        pytest.skip(message)
    return found


def chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One headless run with its own profile (nothing shared with other runs or a user's
    browser), console messages logged to stderr."""
    home = profile / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache")}
    command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-extensions", "--disable-background-networking",
               f"--user-data-dir={profile / 'data'}", "--enable-logging=stderr", "--v=0",
               *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, f"chromium failed ({done.returncode}):\n{done.stderr}"
    return done


def console_messages(stderr: str) -> list[str]:
    """The console messages (every level) and uncaught errors a run logged."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


class _Elements(HTMLParser):
    """Counts, in a serialized DOM, the elements by (tag, class), and the timeline's
    bars (rect.bar inside svg.timeline) and the graph's nodes (g.node inside another svg)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[tuple[str, str]] = Counter()
        self.svg_stack: list[str] = []
        self.in_svg: Counter[tuple[str, str, str]] = Counter()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        cls = dict(attrs).get("class") or ""
        self.counts[tag, cls] += 1
        if self.svg_stack:
            self.in_svg[self.svg_stack[-1], tag, cls] += 1
        if tag == "svg":
            self.svg_stack.append(cls)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag == "svg":
            self.svg_stack.pop()

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg" and self.svg_stack:
            self.svg_stack.pop()


def elements(dom: str) -> _Elements:
    parser = _Elements()
    parser.feed(dom)
    parser.close()
    return parser


def logged_actions(log: str, model: str, target: str) -> int:
    """Actions of the model (its import, and everything under <model>/<target>/) in a
    .ninja_log of one run, counted straight from the lines: one edge logs one line per
    output, all with the same times and command hash."""
    edges = set()
    lines = log.splitlines()
    assert lines[0].startswith("# ninja log v")
    for line in lines[1:]:
        start, end, _mtime, output, command_hash = line.split("\t")
        parts = output.split("/")
        if parts[0] == model and (len(parts) == 2 or parts[1] == target):
            edges.add((start, end, command_hash))
    return len(edges)


def png_is_drawn(data: bytes, size: tuple[int, int]) -> bool:
    """The PNG has the window's size and is not one flat colour: its decompressed scanlines
    hold many distinct byte values (a blank page gives two or three)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == size
    idat, at = b"", 8
    while at < len(data):
        length = int.from_bytes(data[at:at + 4], "big")
        if data[at + 4:at + 8] == b"IDAT":
            idat += data[at + 8:at + 8 + length]
        at += 12 + length
    return len(set(zlib.decompress(idat))) > 32


def artifact_dir(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("BUILDGEN_TEST_ARTIFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# Measures, after layout, how many graph nodes and timeline bars have a size on screen and
# lie inside the page; writes the figures into the DOM, where --dump-dom shows them.
_MEASURE = """<script>
function drawn(selector) {
  const page = document.documentElement.getBoundingClientRect();
  return [...document.querySelectorAll(selector)].filter(e => {
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.left >= page.left && r.right <= page.right + 1;
  }).length;
}
const out = document.createElement("pre");
out.id = "measured";
out.textContent = JSON.stringify({nodes: drawn("svg:not(.timeline) g.node rect"),
                                  bars: drawn("svg.timeline rect.bar")});
document.body.appendChild(out);
</script>"""


def test_missing_chromium_skips_locally_but_fails_in_ci(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "find_chromium", lambda: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="needs headless chromium"):
        require_chromium()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must have it"):
        require_chromium()


def test_console_check_sees_planted_errors(tmp_path):
    """The no-console-message check can fail: a console.error and a thrown error are seen,
    and a clean page gives none."""
    binary = require_chromium()
    bad, good = tmp_path / "bad.html", tmp_path / "good.html"
    bad.write_text("<!DOCTYPE html><html><body><p>x</p>"
                   "<script>console.error('planted console error');</script>"
                   "<script>throw new Error('planted thrown error');</script></body></html>")
    good.write_text("<!DOCTYPE html><html><body><p>x</p></body></html>")
    seen = console_messages(chromium(binary, tmp_path / "p1", "--dump-dom",
                                     bad.as_uri()).stderr)
    assert any("planted console error" in line for line in seen), seen
    assert any("Uncaught Error: planted thrown error" in line for line in seen), seen
    assert console_messages(chromium(binary, tmp_path / "p2", "--dump-dom",
                                     good.as_uri()).stderr) == []


@pytest.mark.slow
def test_report_page_renders_in_chromium(plugin, tmp_path, capsys):
    binary = require_chromium()
    manifest = _project(tmp_path)
    assert main(["report", "--manifest", str(manifest)]) == 0
    build = tmp_path / "build"
    folder = build / "blocks" / "fast"
    page = folder / "report.html"
    partition = json.loads((folder / "partition.json").read_text())
    nodes = sum(len(r["nodes"]) for r in partition["regions"])
    actions = logged_actions((build / ".ninja_log").read_text(), "blocks", "fast")
    assert nodes > 0 and actions > 5  # import, partition, codegen, compiles, link, report

    # The page as it is: no console message, every element there after loading.
    done = chromium(binary, tmp_path / "p1", "--dump-dom", page.as_uri())
    assert console_messages(done.stderr) == []
    dom = elements(done.stdout)
    assert dom.in_svg["", "g", "node"] == nodes
    assert dom.in_svg["", "g", "region"] == len(partition["regions"])
    assert dom.in_svg["timeline", "g", "action"] == actions
    assert dom.in_svg["timeline", "rect", "bar"] == actions
    assert dom.counts["script", ""] == 0

    # Laid out: each node and bar has a size on screen (a copy of the page with a script
    # that measures them; the page itself has none).
    measured = tmp_path / "measured.html"
    measured.write_text(page.read_text().replace("</body>", _MEASURE + "</body>"))
    done = chromium(binary, tmp_path / "p2", "--dump-dom", measured.as_uri())
    assert console_messages(done.stderr) == []
    figures = done.stdout.split('<pre id="measured">', 1)[1].split("</pre>", 1)[0]
    assert json.loads(figures) == {"nodes": nodes, "bars": actions}

    # The screenshot, kept.
    shot = artifact_dir(tmp_path) / "report_blocks_fast.png"
    shot.unlink(missing_ok=True)
    done = chromium(binary, tmp_path / "p3", f"--screenshot={shot}",
                    f"--window-size={WINDOW[0]},{WINDOW[1]}", "--hide-scrollbars",
                    page.as_uri())
    assert console_messages(done.stderr) == []
    assert png_is_drawn(shot.read_bytes(), WINDOW)
    with capsys.disabled():
        print(f"\nscreenshot of report.html: {shot}")


def test_timeline_picks_the_models_newest_run_and_escapes_every_name():
    """No browser needed: the drawing's content. Output paths come from model names, which
    are hostile input: markup, quotes, a bidi override and an undecodable byte show as
    text. The run drawn is the newest that ran any action of the model."""
    from buildgen.ninja.trace import NinjaLog, parse_ninja_log
    from buildgen.partition.timeline import model_timeline, render_timeline_svg

    evil = 'm<script>"&\u202e'
    log = parse_ninja_log("\n".join([
        "# ninja log v7",
        f"0\t100\t1\t{evil}/graph.json\taa",  # run 1: the import,
        f"0\t100\t1\t{evil}/weights.bin\taa",  # one edge of two outputs
        f"100\t250\t1\t{evil}/t/src/c.c\tcc",  # (lines in order of finishing)
        f"100\t250\t1\t{evil}/u/partition.json\tdd",  # another target
        f"100\t300\t1\t{evil}/t/partition.json\tbb",  # alongside c.c: a second lane
        f"0\t40\t1\t{evil}/t/obj/x\udcff.o\tee",  # run 2: one compile
        "0\t30\t1\tother/t/partition.json\tff",  # run 3: another model only
        "",
    ]))
    timeline = model_timeline(log, evil, "t")
    assert (timeline.run, timeline.runs, len(timeline.jobs)) == (2, 3, 1)
    first = NinjaLog(log.version, log.entries[:5])  # run 1 alone
    timeline = model_timeline(first, evil, "t")
    assert len(timeline.jobs) == 3 and sorted(timeline.lanes.values()) == [0, 0, 1]
    svg = render_timeline_svg(timeline)
    assert svg == render_timeline_svg(model_timeline(first, evil, "t"))  # same log, same bytes
    assert svg.count('<g class="action">') == 3 and svg.count('class="bar"') == 3
    assert "<script" not in svg and "\u202e" not in svg
    assert "m&lt;script&gt;&quot;&amp;\\u202e/graph.json" in svg
    assert render_timeline_svg(model_timeline(log, "absent", "t")) == ""
    svg = render_timeline_svg(model_timeline(log, evil, "t"))
    assert "x\\udcff.o" in svg and "\udcff" not in svg
