"""`buildgen tune`'s profilers on the executor's workers (buildgen.remote.programs): the
program runs on a worker with the target's GPU, every time (a timing is never served from
the action cache), and its output is parsed as a local run's; the CLI's choice of where
profilers run."""

from __future__ import annotations

import subprocess
from pathlib import Path

from buildgen.partition.tune.backend_cli import profiler_runner
from buildgen.partition.tune.programs import run_here
from buildgen.remote.programs import RemoteProgramRunner
from buildgen.remote.settings import resolve_executor
from buildgen.targets import parse_target

PROFILER = r"""
#include <stdio.h>
int main(void) { printf("warming up\nseconds 1.5e-06\n"); fprintf(stderr, "note\n"); return 0; }
"""


def _program(folder: Path) -> Path:
    source, program = folder / "profile.c", folder / "bg_profile"
    source.write_text(PROFILER)
    subprocess.run(["cc", str(source), "-o", str(program)], check=True)
    return program


def test_a_profiler_runs_on_a_worker_with_the_targets_gpu(reapi_service, tmp_path) -> None:
    settings = resolve_executor({"executor": reapi_service.address,
                                 "instance": reapi_service.instance}, {})
    runner = RemoteProgramRunner(settings, "sm_90")
    program = _program(tmp_path)
    before = len(reapi_service.executed())
    runs = [runner(program), runner(program)]
    assert runs[0] == runs[1] == run_here(program)
    assert runs[0].stdout.splitlines()[-1] == "seconds 1.5e-06"
    records = reapi_service.executed()[before:]
    assert len(records) == 2  # measured twice: never an answer from the action cache
    assert all(r["platform"]["gpu"] == "sm_90" and r["argv"] == ["./bg_profile"]
               for r in records)
    from buildgen.backends.cutlass import tune

    assert tune.run_profiler(None, program, run=runner) == 1.5e-06  # type: ignore[arg-type]


def test_where_the_profilers_run(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("BUILDGEN_REMOTE_EXECUTOR", raising=False)
    target = parse_target({"kind": "composite", "host": {"kind": "c"},
                           "device": {"kind": "cuda", "arch": "sm_90"},
                           "accelerators": [{"kind": "cutlass"}]})
    assert profiler_runner(tmp_path, target, "cutlass", here=False)[0] is run_here
    monkeypatch.setenv("BUILDGEN_REMOTE_EXECUTOR", "grpc://127.0.0.1:1")
    runner, machine = profiler_runner(tmp_path, target, "cutlass", here=False)
    assert isinstance(runner, RemoteProgramRunner) and runner.gpu == "sm_90"
    assert machine == "a sm_90 worker of grpc://127.0.0.1:1"
    assert profiler_runner(tmp_path, target, "cutlass", here=True)[0] is run_here
