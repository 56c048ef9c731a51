"""cuDNN algorithm tuning: `buildgen tune --backend cudnn` with compiling and running injected
(which convolutions it times, the records it writes), the codegen naming the fastest recorded
algorithm within the workspace limit, and (with nvcc) the module and the profiler compiling;
the profiler runs where a GPU is, and fails naming the CUDA call where none is."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from cpulib_build import imported, one_region
from cpulib_cases import resblock
from gpulib import compile_module, example, gpu_target

from buildgen.backends.cudnn import CudnnBackend
from buildgen.backends.cudnn import tune as cudnn_tune
from buildgen.backends.cudnn.algorithms import (
    ALGORITHMS,
    conv_problem,
    record_key,
    recorded_algorithm,
)
from buildgen.backends.cudnn.backend import settings_of
from buildgen.backends.cudnn.lower import ConvCall
from buildgen.backends.gpu_libraries import CUDNN, wheel_dirs
from buildgen.errors import BuildgenError
from buildgen.partition.cost.keys import key_text
from buildgen.partition.cost.records import Record, Records, empty_records, load_records

OPTIONS = {"sm": 90}
# What the fake GPU reports: IMPLICIT_PRECOMP_GEMM fastest but with a 48 MiB workspace,
# WINOGRAD second with none; FFT cannot run.
FAKE = {"IMPLICIT_GEMM": (9e-6, 0), "IMPLICIT_PRECOMP_GEMM": (3e-6, 48 << 20),
        "GEMM": (8e-6, 1 << 20), "DIRECT": (20e-6, 0), "FFT_TILING": (7e-6, 4 << 20),
        "WINOGRAD": (4e-6, 0), "WINOGRAD_NONFUSED": (5e-6, 2 << 20)}


class FakeGpu:
    """Compiles nothing (writes the real profiler source) and 'runs' it: every problem gets
    the FAKE timings. Counts the runs."""

    def __init__(self) -> None:
        self.runs: list[int] = []

    def compile(self, jobs: Sequence[cudnn_tune.Job], folder: Path) -> Path:
        source = folder / "bg_cudnn_profile.cu"
        source.write_text(cudnn_tune.profiler_source(jobs))
        return source

    def measure(self, jobs: Sequence[cudnn_tune.Job], program: Path) -> list[cudnn_tune.Timing]:
        self.runs.append(len(jobs))
        lines = [f"problem {i} algo {ALGORITHMS.index(a)} seconds {s} workspace {w}"
                 for i in range(len(jobs)) for a, (s, w) in FAKE.items()]
        lines.append("problem 0 algo 4 cannot run")
        return cudnn_tune.parse_timings("\n".join(lines))


def _conv_calls(model: str) -> tuple[list[ConvCall], list]:
    graph, weights, partition = example(model)
    regions = CudnnBackend().lower(graph, partition, weights)
    calls = [c for r in regions for c in r.calls if isinstance(c, ConvCall)]
    return calls, regions


def _profile(tmp: Path, gpu: FakeGpu, records: Records, **options: object) -> Records:
    calls, _ = _conv_calls("cnn")
    jobs = cudnn_tune.jobs_for(calls, settings_of({**OPTIONS, **options}))
    return cudnn_tune.profile(jobs, records, "test gpu", tmp, gpu.compile, gpu.measure)


def test_each_distinct_convolution_is_one_job_with_the_call_the_module_makes() -> None:
    calls, _ = _conv_calls("cnn")
    jobs = cudnn_tune.jobs_for(calls + calls, settings_of(OPTIONS))
    assert len(jobs) == len({conv_problem(c) for c in calls}) >= 2
    kinds = {conv_problem(c).call for c in calls}
    assert kinds <= set(cudnn_tune.CALLS)
    assert all(j.sm == 90 and j.math == "CUDNN_FMA_MATH" for j in jobs)
    tf32 = cudnn_tune.jobs_for(calls, settings_of({**OPTIONS, "allow_tf32": True}))
    assert {j.math for j in tf32} == {"CUDNN_DEFAULT_MATH"}
    with pytest.raises(ValueError, match="'sm' attribute is unset"):
        cudnn_tune.jobs_for(calls, settings_of({}))


def test_records_hold_every_algorithm_that_ran_and_a_second_run_measures_nothing(
        tmp_path: Path) -> None:
    gpu = FakeGpu()
    records = _profile(tmp_path / "tune", gpu, empty_records("records.json"))
    calls, _ = _conv_calls("cnn")
    problems = {conv_problem(c) for c in calls}
    assert len(records.by_key) == len(problems) * len(FAKE)  # FFT could not run
    assert gpu.runs == [len(problems)]  # one profiler run for all of them
    path = tmp_path / "records.json"
    path.write_text(records.dump())
    again = load_records(path)
    assert again.dump() == records.dump()
    lines = [json.loads(line.rstrip(",")) for line in path.read_text().splitlines()[1:-1]]
    precomp = [e for e in lines if e["key"]["algorithm"] == "IMPLICIT_PRECOMP_GEMM"]
    assert precomp and all(e["workspace_bytes"] == 48 << 20 for e in precomp)
    assert all("workspace_bytes" not in e for e in lines if e["key"]["algorithm"] == "DIRECT")
    assert _profile(tmp_path / "tune", gpu, again) is again and gpu.runs == [len(problems)]
    source = (tmp_path / "tune" / "bg_cudnn_profile.cu").read_text()
    assert "cudnnConvolutionBiasActivationForward" in source and "#define BG_MATH" in source


def test_codegen_names_the_fastest_recorded_algorithm_within_the_workspace_limit(
        tmp_path: Path) -> None:
    records = _profile(tmp_path, FakeGpu(), empty_records("records.json"))
    graph, weights, partition = example("cnn")
    backend = CudnnBackend()
    text = backend.generate("cnn", graph, partition, OPTIONS, weights, records=records).text
    # 64 MiB (the default limit) admits the 48 MiB IMPLICIT_PRECOMP_GEMM: the fastest.
    assert "(int)CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM" in text
    assert "algorithm IMPLICIT_PRECOMP_GEMM: fastest in records.json (3 us" in text
    small = backend.generate("cnn", graph, partition, {**OPTIONS, "workspace_limit_mb": 32},
                             weights, records=records).text
    assert "(int)CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD};" in small
    assert "IMPLICIT_PRECOMP_GEMM" not in small
    # Records of another GPU or math mode do not apply: cuDNN chooses at create.
    for options in ({"sm": 80}, {**OPTIONS, "allow_tf32": True}, {}):
        other = backend.generate("cnn", graph, partition, options, weights,
                                 records=records).text
        assert "(int)CUDNN_CONVOLUTION_FWD_ALGO" not in other
        assert "cuDNN's ranking at create (no tuning record)" in other
    plain = backend.generate("cnn", graph, partition, OPTIONS, weights).text
    assert plain.count(", -1};") == text.count("(int)CUDNN_CONVOLUTION_FWD_ALGO_")
    assert backend.generate("cnn", graph, partition, OPTIONS, weights,
                            records=records).text == text  # deterministic


def test_the_fastest_fitting_record_wins_and_ties_go_to_the_lower_algorithm() -> None:
    calls, _ = _conv_calls("cnn")
    problem = conv_problem(calls[0])
    settings = settings_of(OPTIONS)

    def records(*entries: tuple[str, float, int]) -> Records:
        return empty_records("r.json").merged(
            Record(key_text(record_key(problem, a, 90, settings.math)), s, 20, "", w)
            for a, s, w in entries)

    best = recorded_algorithm(problem, 90, settings.math, 1 << 20,
                              records(("GEMM", 2e-6, 2 << 20), ("DIRECT", 5e-6, 0),
                                      ("IMPLICIT_GEMM", 5e-6, 0)))
    assert best is not None and best.algorithm == "IMPLICIT_GEMM" and best.value == 0
    assert recorded_algorithm(problem, 90, settings.math, 1 << 20, None) is None
    assert recorded_algorithm(problem, None, settings.math, 1 << 20,
                              records(("DIRECT", 1e-6, 0))) is None


def test_tuning_is_declared_in_rules_and_the_codegen_action_reads_the_records(
        tmp_path: Path) -> None:
    from buildgen.partition.tune.backend_cli import load_tuner, tunable_kinds
    from buildgen.targets import get_kind

    assert tunable_kinds() == ["cudnn", "cutlass", "onednn"]
    assert isinstance(load_tuner("cudnn"), cudnn_tune.CudnnTuner)
    assert get_kind("cudnn").reads_records and not get_kind("cublas").reads_records
    with pytest.raises(BuildgenError, match="has no tuner"):
        load_tuner("cublas")


@pytest.mark.slow  # nvcc: ~5 s each
def test_module_with_records_and_the_profiler_compile(tmp_path: Path) -> None:
    try:
        wheel_dirs(CUDNN)
    except BuildgenError:
        pytest.skip(f"cuDNN is not installed: {CUDNN.pip}")
    graph, weights = imported(resblock(), {"x": (1, 8, 10, 10)}, tmp_path)
    partition = one_region(graph, "cudnn", None)
    regions = CudnnBackend().lower(graph, partition, weights)
    calls = [c for r in regions for c in r.calls if isinstance(c, ConvCall)]
    jobs = cudnn_tune.jobs_for(calls, settings_of(OPTIONS))
    records = cudnn_tune.profile(jobs, empty_records("r.json"), "test", tmp_path / "t",
                                 FakeGpu().compile, FakeGpu().measure)
    text = CudnnBackend().generate("resblock", graph, partition, OPTIONS, weights,
                                   records=records).text
    assert "(int)CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM" in text
    compile_module(text, "cudnn", tmp_path, "resblock")
    from buildgen.resources import include_dir
    from buildgen.targets.toolchain import toolchain_for

    toolchain = toolchain_for(gpu_target(), "cudnn")
    compiler = cudnn_tune.Compiler(toolchain.cc, toolchain.cflags, toolchain.ldflags,
                                   str(include_dir()))
    program = compiler(jobs, tmp_path)
    assert program.exists() and program.stat().st_mode & 0o111
    from gpulib import no_gpu_reason

    if no_gpu_reason() is not None:
        with pytest.raises(BuildgenError, match="cudaStreamCreate failed in setup"):
            cudnn_tune.run_profiler(jobs, program)
        return
    timings = cudnn_tune.run_profiler(jobs, program)
    assert {t.index for t in timings} == set(range(len(jobs)))
    assert all(t.seconds > 0 for t in timings)


MANIFEST = """\
buildgen: 1
build_dir: build
targets:
  gpu:
    kind: composite
    host: {kind: c}
    device: {kind: cuda, arch: sm_90}
    accelerators: [{kind: cudnn}]
models:
  cnn:
    source: MODEL
    inputs: {image: [1, 3, 32, 32]}
    targets: [gpu]
    partition: {records: gpu.records.json}
"""


@pytest.mark.slow  # import, partition, codegen through ninja; nvcc for the profiler
def test_tune_cli_lists_problems_fails_clearly_without_a_gpu_and_records_rerun_codegen(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpulib import no_gpu_reason

    from buildgen.cli import main
    from buildgen.ninja.tool import run_ninja

    try:
        wheel_dirs(CUDNN)
    except BuildgenError:
        pytest.skip(f"cuDNN is not installed: {CUDNN.pip}")
    model = Path(__file__).resolve().parents[3] / "examples" / "models" / "cnn.onnx"
    manifest = tmp_path / "BUILD.yaml"
    manifest.write_text(MANIFEST.replace("MODEL", str(model)))
    assert main(["tune", "--backend", "cudnn", "--dry-run", "--manifest", str(manifest)]) == 0
    out = capsys.readouterr().out
    calls, _ = _conv_calls("cnn")
    assert f"cnn/gpu: {len({conv_problem(c) for c in calls})} distinct cudnn problems" in out
    assert main(["tune", "--backend", "cublas", "--manifest", str(manifest)]) == 1
    assert "kind 'cublas' has no tuner" in capsys.readouterr().err
    if no_gpu_reason() is not None:
        assert main(["tune", "--backend", "cudnn", "--manifest", str(manifest)]) == 1
        assert "the cuDNN profiler failed: failed: cudaStreamCreate failed in setup" in \
            capsys.readouterr().err
        assert not (tmp_path / "gpu.records.json").exists()
        # What a GPU would have written:
        records = _profile(tmp_path / "fake", FakeGpu(), empty_records("gpu.records.json"))
        (tmp_path / "gpu.records.json").write_text(records.dump())
    else:
        assert main(["tune", "--backend", "cudnn", "--manifest", str(manifest)]) == 0
    source = "cnn/gpu/src/cudnn.cu"
    assert run_ninja(tmp_path / "build", [source], capture=True).returncode == 0
    text = (tmp_path / "build" / source).read_text()
    assert text.count("(int)CUDNN_CONVOLUTION_FWD_ALGO_") == len(calls)
    # New records re-run the cudnn codegen (and only the actions that read them).
    path = tmp_path / "gpu.records.json"
    path.write_text(empty_records().dump())
    explain = run_ninja(tmp_path / "build", ["-n", "-d", "explain", source], capture=True)
    assert "[1/1] CODEGEN cudnn cnn/gpu" in explain.stdout  # the partition does not read them
    assert "older than most recent input ../gpu.records.json" in explain.stderr
    assert run_ninja(tmp_path / "build", [source], capture=True).returncode == 0
    assert "(int)CUDNN_CONVOLUTION_FWD_ALGO_" not in (tmp_path / "build" / source).read_text()
