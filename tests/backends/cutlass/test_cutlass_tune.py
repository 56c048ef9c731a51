"""`buildgen tune`'s CUTLASS profiling, with compiling and measuring injected: which
candidates it profiles, the records it writes, and how use_multiprocessing and tmp_dir
change how it runs (never what it finds)."""

from __future__ import annotations

import os
from pathlib import Path

from cutlass_cases import generate, model, partition

from buildgen.backends.cutlass import choose, tune
from buildgen.backends.cutlass.lower import lower_region
from buildgen.partition.cost.records import empty_records, load_records

SECONDS = {"128x128x16_64x64x16_s4": 3e-6, "64x64x16_32x32x16_s5": 1e-6}


def fake_compile(job: tune.Job, folder: Path) -> Path:
    """Writes the real profiler source; the 'program' records which process built it."""
    program = folder / f"{job.name}.pid"
    (folder / f"{job.name}.cu").write_text(tune.profiler_source(job))
    program.write_text(str(os.getpid()))
    return program


def fake_measure(job: tune.Job, program: Path) -> float | None:
    if job.split_k > 1:
        return None  # as a candidate that cannot run the problem reports
    return SECONDS.get(job.kernel.tile.describe(), 2e-6)


def _jobs(settings: choose.Settings) -> list[list[tune.Job]]:
    calls = [c for r in partition("mlp").regions_for("cutlass")
             for c in lower_region(model("mlp").graph, r.nodes)]
    return tune.jobs_for(calls, settings)


def _profile(tmp: Path, multiprocessing: bool, **attrs: object) -> tune.Records:
    settings = choose.settings_of({"sm": 90, "find_first_valid": False, **attrs})
    options = tune.RunOptions(multiprocessing, tmp, jobs=2)
    return tune.profile(_jobs(settings), settings, options, empty_records(), "test",
                        fake_compile, fake_measure)


def test_every_candidate_of_every_distinct_problem_is_profiled(tmp_path: Path) -> None:
    settings = choose.settings_of({"sm": 90, "split_k_slices": [1, 2]})
    problems = _jobs(settings)
    assert len(problems) == 3  # mlp's three GEMMs
    for jobs in problems:
        assert len(jobs) == len(choose.candidates(jobs[0].problem, settings)) * len(
            choose.split_factors(jobs[0].problem, settings))
    wider = choose.settings_of({"sm": 90, "profile_all_alignments": True})
    assert sum(map(len, _jobs(wider))) > sum(map(len, _jobs(choose.settings_of({"sm": 90}))))


def test_records_round_trip_and_choose_the_fastest(tmp_path: Path) -> None:
    records = _profile(tmp_path / "work", False, split_k_slices=[1, 2])
    path = tmp_path / "records.json"
    path.write_text(records.dump())
    loaded = load_records(path)
    assert loaded.by_key == records.by_key and len(records.by_key) > 0
    text, listing = generate("mlp", loaded, split_k_slices=[1, 2], find_first_valid=False)
    chosen = [line for line in text.splitlines() if "(record)" in line]
    assert len(chosen) == 6  # three GEMMs, in the header and at their calls
    assert all("64x64x16_32x32x16_s5" in line for line in chosen)  # the fastest
    assert "split-K 2" not in text  # split 2 never ran


def test_find_first_valid_stops_at_the_first_candidate_that_runs(tmp_path: Path) -> None:
    every = _profile(tmp_path / "all", False)
    first = _profile(tmp_path / "first", False, find_first_valid=True)
    assert len(first.by_key) == 3 < len(every.by_key)
    # A problem with a record is done: tuning again (another target of the same shapes)
    # profiles nothing more.
    settings = choose.settings_of({"sm": 90, "find_first_valid": True})
    again = tune.profile(_jobs(settings), settings, tune.RunOptions(False, tmp_path / "again"),
                         first, "test", fake_compile, fake_measure)
    assert again.by_key == first.by_key
    assert not list((tmp_path / "again").glob("*.cu"))


def test_use_multiprocessing_compiles_in_other_processes(tmp_path: Path) -> None:
    serial = _profile(tmp_path / "serial", False)
    parallel = _profile(tmp_path / "parallel", True)
    assert serial.by_key == parallel.by_key  # same findings
    pids = {p.read_text() for p in (tmp_path / "serial").glob("*.pid")}
    assert pids == {str(os.getpid())}
    pids = {p.read_text() for p in (tmp_path / "parallel").glob("*.pid")}
    assert str(os.getpid()) not in pids and pids


def test_tmp_dir_is_where_the_profilers_are_written(tmp_path: Path) -> None:
    chosen = tmp_path / "scratch"
    options = tune.run_options({"tmp_dir": str(chosen), "use_multiprocessing": False},
                               tmp_path / "build")
    assert options.tmp_dir == chosen and not options.use_multiprocessing
    default = tune.run_options({"tmp_dir": None}, tmp_path / "build")
    assert default.tmp_dir == tmp_path / "build" / "tune" / "cutlass"
    _profile(chosen, False)
    sources = list(chosen.glob("bg_cutlass_gemm_*.cu"))
    assert sources and "cudaEventElapsedTime" in sources[0].read_text()
