"""`profile: true` and `buildgen profile`, end to end on the committed cnn example built for
the composite CPU target: the library times each region of its partition, the table has a
row per region and the backend totals, the c host's regions list their kernels (each with
the ONNX nodes it runs) and oneDNN's regions their steps (each with the kernel oneDNN
picked), the trace is Chrome's format with one event per region and its kernels nested
inside it, an unprofiled build reads no clock and is refused by `buildgen profile` with the
fix, and turning profile on re-runs the executor, the modules that time their kernels (c
and onednn) and the link."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from buildgen.backends.libraries import pip_onednn_prefix
from buildgen.cli import main
from buildgen.errors import BuildgenError

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
LEVELS = ", isa_levels: [x86-64]" if platform.machine() == "x86_64" else ""


def _manifest(profile: bool) -> str:
    host = f"{{kind: c, opt_level: 1{LEVELS}{', profile: true' if profile else ''}}}"
    return f"""buildgen: 1
targets:
  cpu: {{kind: composite, host: {host}, accelerators: [onednn]}}
  host: {host}
models:
  cnn: {{source: models/cnn.onnx, inputs: {{image: [1, 3, 32, 32]}}, targets: [cpu, host]}}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    try:
        pip_onednn_prefix()
    except BuildgenError:
        pytest.skip("oneDNN is not installed")
    root = tmp_path_factory.mktemp("profile-project")
    (root / "models").mkdir()
    shutil.copy(REPO / "examples" / "models" / "cnn.onnx", root / "models")
    (root / "BUILD.yaml").write_text(_manifest(profile=False))
    with pytest.MonkeyPatch.context() as patch:
        path = os.environ.get("PYTHONPATH")
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), path])))
        yield root


def _lib(project: Path, target: str = "cpu") -> Path:
    return project / "build" / "cnn" / target


def test_an_unprofiled_library_reads_no_clock_and_profile_says_how_to_turn_it_on(
        project: Path, capfd):
    assert main(["-C", str(project), "profile", "cnn"]) == 1
    err = capfd.readouterr().err
    assert "not built with profile: true" in err and "{kind: c, profile: true}" in err
    assert "profile_now" not in (_lib(project) / "src" / "model.c").read_text()
    assert "BG_DNNL_PROFILE" not in (_lib(project) / "src" / "onednn.c").read_text()
    assert "profile_count" not in (_lib(project) / "include" / "cnn.h").read_text()


def test_profile_times_every_region_and_writes_a_trace(project: Path, capfd):
    (project / "BUILD.yaml").write_text(_manifest(profile=True))
    assert main(["-C", str(project), "build"]) == 0
    ran = _ran_actions(project, capfd.readouterr().out)
    # The executor and the modules that time their kernels (c and onednn) re-run; the
    # host-only target's onednn options are not there to change.
    assert any(a.startswith("EXECUTOR") for a in ran), ran
    assert any(re.match(r"CC cnn/cpu c\b", a) for a in ran), ran
    assert any(re.match(r"CC cnn/cpu onednn", a) for a in ran), ran

    trace = project / "trace.json"
    assert main(["-C", str(project), "profile", "cnn", "--runs", "5",
                 "--trace", str(trace)]) == 0
    printed = capfd.readouterr().out
    partition = json.loads((_lib(project) / "partition.json").read_text())
    regions = partition["regions"]
    assert len(regions) > 1  # oneDNN regions with the host between them
    assert "cnn/cpu: 5 runs after a warm-up" in printed
    for region in regions:
        assert re.search(rf"^{region['id']}\s+{region['target']}\s+{len(region['nodes'])}\s",
                         printed, re.M), printed
    assert re.search(r"^all\s+onednn\s", printed, re.M)
    assert re.search(r"^outside\s+executor\s", printed, re.M)

    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X" and e["cat"] not in ("run", "kernel")]
    assert [e["name"] for e in spans] == [f"{r['id']} {r['target']}" for r in regions]
    assert [e["args"]["nodes"] for e in spans] == [r["nodes"] for r in regions]
    (run,) = [e for e in events if e["name"] == "run"]
    assert sum(e["dur"] for e in spans) <= run["dur"] + 1
    assert all(e["dur"] >= 0 for e in spans)

    header = (_lib(project) / "include" / "cnn.h").read_text()
    assert f"#define CNN_PROFILE_REGIONS {len(regions)}" in header


def test_a_negative_top_is_refused_before_anything_runs(project: Path, capfd):
    assert main(["-C", str(project), "profile", "cnn", "--target", "host", "--top", "-1"]) == 1
    assert "--top must be 0 (every kernel) or more, got -1" in capfd.readouterr().err


def test_the_c_host_lists_its_kernels_inside_their_regions(project: Path, capfd):
    trace = project / "host-trace.json"
    assert main(["-C", str(project), "profile", "cnn", "--target", "host", "--runs", "3",
                 "--top", "0", "--trace", str(trace)]) == 0
    printed = capfd.readouterr().out
    regions = json.loads((_lib(project, "host") / "partition.json").read_text())["regions"]
    # Every kernel in run order: time, share, region, kernel and the nodes it runs.
    listed = re.findall(r"^\s*\d+\.\d+\s+\S+\s+(r\d+)\s+(k(\d+)_\w+): (\w+) '", printed, re.M)
    assert "kernels, in run order" in printed
    assert [int(number) for _, _, number, _ in listed] == list(range(len(listed))), printed
    assert {op for *_, op in listed} >= {"Conv", "MaxPool", "Gemm"}, printed

    events = json.loads(trace.read_text())["traceEvents"]
    (span,) = [e for e in events if e.get("cat") == "c"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert [k["name"] for k in kernels] == [name for _, name, _, _ in listed]
    assert {k["args"]["region"] for k in kernels} == {r["id"] for r in regions}
    assert all(span["ts"] - 1e-3 <= k["ts"] and k["ts"] + k["dur"] <= span["ts"]
               + span["dur"] + 1e-3 for k in kernels), (span, kernels)

def test_onednn_regions_list_each_step_with_the_kernel_onednn_picked(project: Path, capfd):
    assert main(["-C", str(project), "profile", "cnn", "--runs", "3", "--top", "0"]) == 0
    printed = capfd.readouterr().out
    regions = json.loads((_lib(project) / "partition.json").read_text())["regions"]
    onednn = {r["id"] for r in regions if r["target"] == "onednn"}
    # "r0  k0 Conv 'conv1': convolution brgconv:avx2": the group, then oneDNN's primitive and
    # its implementation (a reorder between layouts is a step of its group too).
    steps = re.findall(r"^\s*\d+\.\d+\s+\S+\s+(r\d+)\s+k\d+ (\w+) '[^']*': (\w+) (\S+)$",
                       printed, re.M)
    assert {region for region, *_ in steps} == onednn, printed
    assert ("Conv", "convolution") in {(op, primitive) for _, op, primitive, _ in steps}, printed
    assert all(impl != "?" for *_, impl in steps), printed
    source = (_lib(project) / "src" / "onednn.c").read_text()
    assert "#define BG_DNNL_PROFILE 1" in source and "cnn__onednn_kernel_times" in source


def test_the_c_api_reports_what_the_runs_took(project: Path):
    """Through the Python runtime, on the c host's library: counts grow with runs, reset
    clears them, regions' and kernels' alike."""
    import ctypes

    from buildgen import runtime

    compiled = runtime.load(_lib(project, "host") / "libcnn.so")
    try:
        lib = ctypes.CDLL(str(_lib(project, "host") / "libcnn.so"))
        lib.cnn_profile_seconds.restype = ctypes.c_double
        lib.cnn_profile_runs.restype = ctypes.c_uint64
        lib.cnn_profile_region.restype = ctypes.c_char_p
        lib.cnn_profile_kernel.restype = ctypes.c_char_p
        lib.cnn_profile_kernel_seconds.restype = ctypes.c_double
        handle = compiled._handle
        import numpy as np

        image = np.zeros((1, 3, 32, 32), np.float32)
        for _ in range(3):
            compiled(image)
        count = lib.cnn_profile_count()
        assert lib.cnn_profile_runs(handle) == 3
        assert sum(lib.cnn_profile_seconds(handle, k) for k in range(count)) > 0
        assert lib.cnn_profile_region(0).decode().startswith("r0 ")
        assert lib.cnn_profile_region(count) is None
        kernels = lib.cnn_profile_kernel_count(handle)
        labels = [lib.cnn_profile_kernel(handle, k).decode() for k in range(kernels)]
        assert kernels > 0 and all(re.match(r"r\d+ k\d+_\w+: \w+ '", t) for t in labels)
        assert lib.cnn_profile_kernel(handle, kernels) is None
        assert lib.cnn_profile_kernel(handle, -1) is None
        assert sum(lib.cnn_profile_kernel_seconds(handle, k) for k in range(kernels)) > 0
        lib.cnn_profile_reset(handle)
        assert lib.cnn_profile_runs(handle) == 0
        assert all(lib.cnn_profile_seconds(handle, k) == 0 for k in range(count))
        assert all(lib.cnn_profile_kernel_seconds(handle, k) == 0 for k in range(kernels))
    finally:
        compiled.close()


def _ran_actions(project: Path, output: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^\[\d+/\d+\] (.+)$", output, re.M)]
