"""The `c` host without `march`: one object per ISA level, the best the CPU runs picked at create.

One default build of the examples and of two models from the onnx package's zoo (not shaped
alongside buildgen); every level this CPU runs is then forced with BUILDGEN_MAX_ISA and must
report itself through <model>_cpu_isa and match onnxruntime (BUILDGEN_MAX_ISA is read at
create from the process environment; the libraries load in-process, so monkeypatch sets
it). A build with `march` has one object and reports the march it was pinned to.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from buildgen import runtime

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "corpus"))
from corpus_models import BY_NAME, feeds, manifest_inputs, model_path  # noqa: E402

EXAMPLES = yaml.safe_load((REPO / "BUILD.yaml").read_text())["models"]
ZOO = ("zoo_squeezenet", "zoo_shufflenet")
DEFAULT_LEVELS = ("x86-64", "x86-64-v3", "x86-64-v4")
RTOL, ATOL = 1e-3, 1e-4

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.uname().machine != "x86_64", reason="ISA levels are x86-64's"),
]


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def runnable_levels() -> tuple[str, ...]:
    """The default levels this CPU runs, by its /proc/cpuinfo flags (the psABI's lists)."""
    flags = _cpu_flags()
    v3 = {"avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe", "abm"} <= flags
    v4 = v3 and {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"} <= flags
    return ("x86-64",) + (("x86-64-v3",) if v3 else ()) + (("x86-64-v4",) if v4 else ())


def _models() -> dict[str, tuple[Path, dict[str, list[int]]]]:
    models = {name: (REPO / e["source"], e["inputs"]) for name, e in EXAMPLES.items()}
    for name in ZOO:
        models[name] = (model_path(BY_NAME[name]), manifest_inputs(BY_NAME[name]))
    return models


@pytest.fixture(scope="module")
def dispatch_build(tmp_path_factory: pytest.TempPathFactory, buildgen_build) -> Path:
    folder = tmp_path_factory.mktemp("isa")
    entries = {
        name: {"source": str(source), "inputs": inputs, "targets": ["plain"]}
        for name, (source, inputs) in _models().items()
    }
    entries["mlp"]["targets"] = ["plain", "pinned", "pinned_v4"]
    manifest = folder / "BUILD.yaml"
    manifest.write_text(yaml.safe_dump({
        "buildgen": 1,
        "targets": {"plain": {"kind": "c"}, "pinned": {"kind": "c", "march": "x86-64"},
                    "pinned_v4": {"kind": "c", "march": "x86-64-v4", "opt_level": 1}},
        "models": entries,
    }))
    buildgen_build(manifest, folder / "build")
    return folder / "build"


def _inputs(name: str, compiled: runtime.CompiledModel) -> dict[str, np.ndarray]:
    if name in ZOO:
        return feeds(BY_NAME[name])
    rng = np.random.default_rng(0)
    return {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in compiled.inputs}


def test_one_object_per_level(dispatch_build: Path) -> None:
    ninja = (dispatch_build / "build.ninja").read_text()
    for level in DEFAULT_LEVELS:
        assert f"build encoder/plain/obj/c.{level}.o: cc" in ninja
        assert f"-march={level} -DBG_ISA_SUFFIX=__isa_{level.replace('-', '_')}" in ninja
    assert "build mlp/pinned/obj/c.o: cc" in ninja
    assert "mlp/pinned/obj/c.x86-64" not in ninja


@pytest.mark.parametrize("level", DEFAULT_LEVELS)
@pytest.mark.parametrize("name", sorted(_models()))
def test_each_level_matches_onnxruntime(dispatch_build: Path, monkeypatch: pytest.MonkeyPatch,
                                        name: str, level: str, onnxruntime_outputs) -> None:
    if level not in runnable_levels():
        pytest.skip(f"this CPU does not run {level}")
    monkeypatch.setenv("BUILDGEN_MAX_ISA", level)
    compiled = runtime.load(dispatch_build / name / "plain" / f"lib{name}.so")
    assert compiled.cpu_isa == level
    inputs = _inputs(name, compiled)
    ours = compiled.run(inputs)
    compiled.close()
    source = _models()[name][0]
    for out, expected in zip(compiled.output_names, onnxruntime_outputs(source, inputs),
                             strict=True):
        np.testing.assert_allclose(ours[out], expected, rtol=RTOL, atol=ATOL, err_msg=out)


def test_the_best_level_is_the_default_and_a_cap_above_it_changes_nothing(
        dispatch_build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    library = dispatch_build / "mlp" / "plain" / "libmlp.so"
    best = runnable_levels()[-1]
    monkeypatch.delenv("BUILDGEN_MAX_ISA", raising=False)
    assert runtime.load(library).cpu_isa == best
    monkeypatch.setenv("BUILDGEN_MAX_ISA", "x86-64-v4")
    assert runtime.load(library).cpu_isa == best
    # A level that was not compiled: the best compiled one below it.
    monkeypatch.setenv("BUILDGEN_MAX_ISA", "x86-64-v2")
    assert runtime.load(library).cpu_isa == "x86-64"


def test_an_unknown_cap_fails_create_with_the_levels(
        dispatch_build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUILDGEN_MAX_ISA", "avx9000")
    with pytest.raises(runtime.ModelError, match=r"BUILDGEN_MAX_ISA=avx9000 is not a level"):
        runtime.load(dispatch_build / "mlp" / "plain" / "libmlp.so")


def test_a_pinned_build_reports_its_march(
        dispatch_build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUILDGEN_MAX_ISA", "x86-64-v4")  # nothing to pick: ignored
    compiled = runtime.load(dispatch_build / "mlp" / "pinned" / "libmlp.so")
    assert compiled.cpu_isa == "x86-64"


def test_a_build_pinned_to_a_level_the_cpu_lacks_fails_create_and_says_why(
        dispatch_build: Path) -> None:
    """Not an illegal instruction somewhere in a run: create asks the CPU first."""
    library = dispatch_build / "mlp" / "pinned_v4" / "libmlp.so"
    if "x86-64-v4" in runnable_levels():
        assert runtime.load(library).cpu_isa == "x86-64-v4"
        return
    with pytest.raises(runtime.ModelError, match=r"built for x86-64-v4 \(the target's march\), "
                                                 r"which this CPU does not run"):
        runtime.load(library)
