"""`buildgen trace`: .ninja_log (v5, v6, v7) -> Chrome trace events, lanes, stages, runs."""

import json
import random
from itertools import pairwise

import pytest
from small_project import write_project

from buildgen.cli import main
from buildgen.errors import BuildgenError
from buildgen.ninja.trace import (
    Job,
    assign_lanes,
    chrome_trace,
    jobs_of,
    parse_ninja_log,
    render_trace,
    split_builds,
    stage_of,
)


def _log(version, rows):
    return f"# ninja log v{version}\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows)


# One build as ninja 1.11 (v5) logs it: MurmurHash64A hashes, restat mtimes (0 for an edge
# that is not restat). The executor edge has three outputs: three lines, equal times/hash.
V5 = _log(5, [
    (0, 410, 1732252800123456789, "tiny/graph.json", "9a1c1f2e4b7d3c05"),
    (0, 410, 1732252800123456789, "tiny/weights.bin", "9a1c1f2e4b7d3c05"),
    (410, 800, 1732252800533456789, "tiny/cpu/partition.json", "3f0e9d2c1b0a9f8e"),
    (800, 1190, 0, "tiny/cpu/src/c.c", "77aa00bb11cc22dd"),
    (800, 1230, 0, "tiny/cpu/src/model.c", "c0ffee0000000001"),
    (800, 1230, 0, "tiny/cpu/include/tiny.h", "c0ffee0000000001"),
    (800, 1230, 0, "tiny/cpu/src/weights.S", "c0ffee0000000001"),
    (1230, 1400, 0, "tiny/cpu/obj/weights.o", "5eed5eed5eed5eed"),
    (1190, 1530, 0, "tiny/cpu/obj/c.o", "1234abcd1234abcd"),
    (1230, 1610, 0, "tiny/cpu/obj/model.o", "abcd1234abcd1234"),
    (1610, 1650, 0, "tiny/cpu/libtiny.a", "aaaa0000bbbb1111"),
    (1610, 1700, 0, "tiny/cpu/libtiny.so", "cccc2222dddd3333"),
])
# ninja 1.12 (v6): the same lines; mtimes are when each edge started.
V6 = _log(6, [
    (0, 95, 1732252900000000000, "build.ninja", "f00dfacef00dface"),
    (0, 95, 1732252900000000000, "_targets/cpu/options/c.json", "f00dfacef00dface"),
    (3, 260, 1732252900003000000, "tiny/cpu/obj/c.o", "8d2f0c4e6a1b3957"),
    (4, 300, 1732252900004000000, "tiny/cpu/obj/model.o", "1c3e5a7b9d0f2468"),
])
# ninja 1.13 (v7): rapidhash hashes. Two runs: the second (an incremental one) starts over
# at 0 ms and relinks only.
V7 = _log(7, [
    (1, 300, 1732253000001000000, "tiny/cpu/obj/c.o", "6f1d2e3c4b5a6978"),
    (2, 340, 1732253000002000000, "tiny/cpu/obj/model.o", "0e1d2c3b4a596877"),
    (340, 420, 1732253000340000000, "tiny/cpu/libtiny.so", "a1b2c3d4e5f60718"),
    (0, 85, 1732253100000000000, "tiny/cpu/libtiny.so", "a1b2c3d4e5f60718"),
])


def _actions(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


@pytest.mark.parametrize(("text", "version", "count"), [(V5, 5, 12), (V6, 6, 4), (V7, 7, 4)])
def test_each_format_is_read_field_by_field(text, version, count):
    log = parse_ninja_log(text)
    assert log.version == version and len(log.entries) == count
    start, end, _mtime, output, command_hash = text.split("\n")[1].split("\t")
    first = log.entries[0]
    assert (first.start_ms, first.end_ms, first.output) == (int(start), int(end), output)
    assert first.command_hash == command_hash


def test_one_edge_with_several_outputs_is_one_event_listing_them_all():
    (executor,) = [e for e in _actions(chrome_trace(parse_ninja_log(V5)))
                   if e["name"] == "tiny/cpu/src/model.c"]
    assert executor["args"]["outputs"] == [
        "tiny/cpu/src/model.c", "tiny/cpu/include/tiny.h", "tiny/cpu/src/weights.S"]
    assert (executor["ts"], executor["dur"]) == (800_000, 430_000)  # microseconds
    assert executor["cat"] == "executor" and executor["ph"] == "X"
    assert len(_actions(chrome_trace(parse_ninja_log(V5)))) == 9  # 12 lines, 9 edges


def test_events_carry_the_stage_as_category():
    cats = {e["name"]: e["cat"] for e in _actions(chrome_trace(parse_ninja_log(V5)))}
    assert cats == {
        "tiny/graph.json": "import", "tiny/cpu/partition.json": "partition",
        "tiny/cpu/src/c.c": "codegen", "tiny/cpu/src/model.c": "executor",
        "tiny/cpu/obj/weights.o": "compile", "tiny/cpu/obj/c.o": "compile",
        "tiny/cpu/obj/model.o": "compile", "tiny/cpu/libtiny.a": "link",
        "tiny/cpu/libtiny.so": "link",
    }
    assert _actions(chrome_trace(parse_ninja_log(V6)))[0]["cat"] == "gen"


@pytest.mark.parametrize(("output", "stage"), [
    ("build.ninja", "gen"), ("_targets/t/target.json", "gen"),
    ("_targets/t/options/target.json", "gen"), ("_targets/t/options/cutlass.json", "gen"),
    ("m/graph.json", "import"), ("m/weights.bin", "import"),
    ("m/t/partition.json", "partition"), ("m/t/src/cublas.cu", "codegen"),
    ("m/t/src/onednn.c", "codegen"), ("m/t/src/weights.S", "executor"),
    ("m/t/include/m.h", "executor"), ("m/t/obj/cuda.o", "compile"), ("m/t/libm.so", "link"),
    ("m/t/report.md", "report"), ("elsewhere.txt", "other"), ("m/t/include/other.h", "other"),
])
def test_stages_follow_the_layout(output, stage):
    assert stage_of(output) == stage


def test_only_the_last_run_counts_unless_all_is_asked():
    last = chrome_trace(parse_ninja_log(V7))
    assert [e["name"] for e in _actions(last)] == ["tiny/cpu/libtiny.so"]
    assert _actions(last)[0]["dur"] == 85_000 and last["otherData"]["runs"] == 1
    every = chrome_trace(parse_ninja_log(V7), all_builds=True)
    assert [(e["pid"], e["name"]) for e in _actions(every)] == [
        (1, "tiny/cpu/obj/c.o"), (1, "tiny/cpu/obj/model.o"), (1, "tiny/cpu/libtiny.so"),
        (2, "tiny/cpu/libtiny.so")]
    names = {e["pid"]: e["args"]["name"] for e in every["traceEvents"]
             if e["name"] == "process_name"}
    assert names == {1: "ninja run 1 of 2", 2: "ninja run 2 of 2"}


def test_runs_split_where_finish_times_go_back_or_an_output_repeats():
    # ninja appends a line when an edge finishes, so within one run finish times only grow.
    log = parse_ninja_log(_log(7, [
        (0, 50, 0, "a", "1"),
        (10, 40, 0, "b", "2"),  # finished before a did: a new run began
        (0, 60, 0, "c", "3"),
        (70, 80, 0, "c", "3"),  # c again: an edge runs once per run, so another run
    ]))
    assert [[e.output for e in b] for b in split_builds(log.entries)] == [["a"], ["b", "c"], ["c"]]


def test_the_same_command_at_other_times_is_another_event():
    build = parse_ninja_log(_log(7, [(0, 5, 0, "x.o", "ab"), (6, 9, 0, "y.o", "ab")])).entries
    assert [j.outputs for j in jobs_of(build)] == [("x.o",), ("y.o",)]


def test_lanes_never_hold_overlapping_jobs_and_are_as_few_as_the_peak():
    rng = random.Random(7)
    for _ in range(50):
        jobs = []
        for i in range(rng.randrange(1, 40)):
            start = rng.randrange(0, 500)
            jobs.append(Job(start, start + rng.randrange(0, 120), (f"o{i}",), f"{i:x}"))
        lanes = assign_lanes(jobs)
        by_lane: dict[int, list[Job]] = {}
        for job, lane in lanes.items():
            by_lane.setdefault(lane, []).append(job)
        for lane_jobs in by_lane.values():
            lane_jobs.sort(key=lambda j: (j.start_ms, j.end_ms))
            assert all(a.end_ms <= b.start_ms for a, b in pairwise(lane_jobs))
        peak = max(sum(1 for j in jobs if j.start_ms <= t < j.end_ms) for t in range(0, 621))
        assert len(by_lane) == max(peak, 1)


def test_the_trace_is_the_same_bytes_every_time_and_valid_json():
    first = render_trace(chrome_trace(parse_ninja_log(V5)))
    assert first == render_trace(chrome_trace(parse_ninja_log(V5)))
    loaded = json.loads(first)
    assert loaded["displayTimeUnit"] == "ms" and loaded["otherData"]["ninja_log_version"] == 5
    lanes = {e["args"]["name"] for e in loaded["traceEvents"] if e["name"] == "thread_name"}
    assert lanes == {"lane 0", "lane 1", "lane 2"}  # codegen, executor, then 3 compiles


@pytest.mark.parametrize(("text", "message"), [
    ("# ninja log v4\n0\t1\t0\tx\techo x\n", "format v4; buildgen reads v5, v6, v7"),
    ("# ninja log v8\n", "format v8"),
    ("ninja log\n", "not a ninja log"),
    ("# ninja log v7\n0\t1\t0\tx\tzz\n0\t1\t0\ty\t1\n", ".ninja_log:2: malformed log line"),
    ("# ninja log v7\n0\t1\tx\t1\n0\t1\t0\ty\t1\n", ".ninja_log:2: malformed log line"),
])
def test_other_files_are_refused_with_a_position(text, message):
    with pytest.raises(BuildgenError, match=message):
        parse_ninja_log(text)


def test_a_last_line_cut_short_by_a_stopped_ninja_is_ignored():
    log = parse_ninja_log("# ninja log v7\n0\t1\t0\tx\t1\n3\t4\t0\ty")
    assert [e.output for e in log.entries] == ["x"]


def test_an_empty_log_is_an_empty_trace():
    assert _actions(chrome_trace(parse_ninja_log("# ninja log v7\n"))) == []


def test_trace_without_a_build_says_to_build_first(tmp_path, capsys):
    assert main(["trace", "--build-dir", str(tmp_path)]) == 1
    assert "buildgen build" in capsys.readouterr().err


def test_a_real_build_traced(tmp_path, capsys):
    """The log of the real ninja from PyPI (1.13: v7), through `buildgen trace`."""
    manifest, build = write_project(tmp_path / "project"), tmp_path / "build"
    assert main(["build", "--manifest", str(manifest), "--build-dir", str(build)]) == 0
    capsys.readouterr()
    assert main(["trace", "--manifest", str(manifest), "--build-dir", str(build)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {build / 'trace.json'}" in printed and "ui.perfetto.dev" in printed
    # The critical path, edges from ninja itself (the dyndep files' too): it ends at the
    # action that finished last, and starts at the import or at a kernels object's compile.
    path = printed.split("critical path: ", 1)[1].splitlines()[1:]
    assert path[0].split()[1] in ("import", "compile"), printed
    assert path[-1].split()[1] == "link" and "time by stage" in printed
    text = (build / "trace.json").read_text()
    trace = json.loads(text)
    actions = _actions(trace)
    import ninja

    major, minor = (int(p) for p in ninja.__version__.split(".")[:2])
    assert trace["otherData"]["ninja_log_version"] == (7 if (major, minor) >= (1, 13) else 6)
    stages = sorted({e["cat"] for e in actions})
    assert stages == ["codegen", "compile", "executor", "import", "link", "partition", "report"]
    (executor,) = [e for e in actions if e["cat"] == "executor"]
    assert sorted(executor["args"]["outputs"]) == [
        "tiny/cpu/include/tiny.h", "tiny/cpu/src/model.c", "tiny/cpu/src/weights.S"]
    lanes: dict[int, list[tuple[int, int]]] = {}
    for e in actions:
        lanes.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in lanes.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in pairwise(spans))
    # Same log, same bytes; to another file with -o.
    other = tmp_path / "again.json"
    assert main(["trace", "--build-dir", str(build), "-o", str(other)]) == 0
    assert other.read_text() == text

    # An incremental rebuild is a run of its own: by default only it is shown.
    (build / "tiny" / "cpu" / "libtiny.so").unlink()
    assert main(["build", "--manifest", str(manifest), "--build-dir", str(build)]) == 0
    assert main(["trace", "--build-dir", str(build)]) == 0
    last = json.loads((build / "trace.json").read_text())
    assert [e["name"] for e in _actions(last)] == ["tiny/cpu/libtiny.so"]
    assert main(["trace", "--build-dir", str(build), "--all"]) == 0
    every = json.loads((build / "trace.json").read_text())
    assert every["otherData"]["runs"] == 2 and len(_actions(every)) == len(actions) + 1


def test_the_critical_path_follows_the_latest_finishing_inputs():
    from buildgen.ninja.critical_path import critical_path, seconds_by_stage, summary_lines
    from buildgen.ninja.trace import Job

    jobs = [
        Job(0, 1000, ("m/graph.json", "m/weights.bin"), "a"),
        Job(1000, 1500, ("m/t/partition.json",), "b"),
        Job(1500, 4000, ("m/t/src/c.c",), "c"),
        Job(1500, 1600, ("m/t/src/model.c", "m/t/include/m.h", "m/t/src/weights.S"), "d"),
        Job(4000, 9000, ("m/t/obj/c.o",), "e"),
        Job(1600, 1700, ("m/t/obj/model.o",), "f"),
        Job(9000, 9300, ("m/t/libm.so",), "g"),
    ]
    edges = {
        "m/t/libm.so": ["m/t/obj/c.o", "m/t/obj/model.o"],
        "m/t/obj/c.o": ["m/t/src/c.c", "m/t/include/m.h"],
        "m/t/src/c.c": ["m/graph.json", "m/constants.bin", "m/t/partition.json"],
        "m/t/partition.json": ["m/graph.json", "_targets/t/options/target.json"],
        "m/graph.json": ["../m.onnx"],
    }
    path = critical_path(jobs, lambda out: edges.get(out, []))
    assert [s.job.outputs[0] for s in path] == [
        "m/graph.json", "m/t/partition.json", "m/t/src/c.c", "m/t/obj/c.o", "m/t/libm.so"]
    assert [s.stage for s in path] == ["import", "partition", "codegen", "compile", "link"]
    assert seconds_by_stage(jobs)["compile"] == 5.1
    lines = summary_lines(jobs, path)
    assert lines[1] == "critical path: 5 actions, 9.3s of the run's 9.3s wall:"
