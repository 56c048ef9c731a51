"""Depfiles as ninja reads them, and the end-of-build summary's counting."""

from __future__ import annotations

from buildgen.cache.depfile import depfile_text, parse_depfile
from buildgen.cache.journal import Entry, append, journal_size, read_entries
from buildgen.cache.summary import summarize
from buildgen.stages.runner import depfile_text as stage_depfile_text


def test_gcc_style_depfiles_parse():
    text = "obj/a.o: ../src/a.c \\\n  /usr/include/stdio.h ../include/h.h\n\n../include/h.h:\n"
    assert parse_depfile(text) == ["../src/a.c", "/usr/include/stdio.h", "../include/h.h"]


def test_escapes_colons_and_dollars_read_as_ninja_reads_them():
    # Even backslashes before '#' are literal ones and a plain '#'; odd ones before ' '
    # escape it. A colon ends the targets only before white space; '$$' is one '$'.
    assert parse_depfile("out: a\\\\#b c\\\\\\ d") == ["a\\#b", "c\\ d"]
    assert parse_depfile("out: a: b c:d $ e$$f") == ["a", "b", "c:d", "$", "e$f"]
    assert parse_depfile("x.o y.o : \\\\\\\\ g\r\nz: w\n  q") == ["\\\\", "g", "w"]


def test_odd_paths_round_trip_like_the_stages_write_them():
    paths = ["my models/m.onnx", "a#b", "$x", "back\\ slash", "plain"]
    for write in (depfile_text, stage_depfile_text):
        assert parse_depfile(write("out.json", paths)) == paths


def _entry(out, outcome, stage="compile", seconds=1.0, code=0):
    return Entry(rule="cc", stage=stage, output=out, outcome=outcome, seconds=seconds,
                 exit_code=code)  # fmt: skip


def test_summary_counts_each_action_once_and_skips_honestly():
    entries = [
        _entry("a.o", "ran"), _entry("b.o", "local"), _entry("c.o", "remote"),
        _entry("a.o", "local"),  # the same action again: its last outcome counts
        _entry("g.json", "ran", stage="import", seconds=2.5), _entry("x.o", "ran", code=1),
    ]  # fmt: skip
    summary = summarize(entries, planned=9)
    assert (summary.ran, summary.local, summary.remote, summary.failed) == (2, 2, 1, 1)
    assert summary.skipped == 9 - 5
    assert summary.seconds_by_stage == (("import", 2.5), ("compile", 5.0))
    head, times, warning = summary.lines(["remote cache down"])
    assert ("2 ran (1 of them failed), 2 restored from the local cache, 1 from the remote cache, "
            "4 up to date") in head
    assert times == "  time by stage: import 2.5s, compile 5.0s"
    assert warning == "  warning: remote cache down"
    assert "4 not run" in summary.lines(stopped=True)[0]  # a failed build: not "up to date"


def test_the_journal_reads_only_what_was_appended_after_an_offset(tmp_path):
    append(tmp_path, _entry("a.o", "ran"))
    offset = journal_size(tmp_path)
    append(tmp_path, _entry("b.o", "local"))
    with open(tmp_path / ".buildgen" / "actions.jsonl", "a") as f:
        f.write('{"cut short')  # a crash mid-line: skipped, the rest still counts
    assert [e.output for e in read_entries(tmp_path, offset)] == ["b.o"]


def test_a_parsed_depfile_is_the_callers_to_change():
    """parse_depfile remembers what it parsed (a runner reads the same text again): each
    call still gets a list of its own."""
    text = "a.o: a.c b.h\n"
    first = parse_depfile(text)
    first.append("c.h")
    assert parse_depfile(text) == ["a.c", "b.h"]
