"""No undefined behaviour: the `c` host's code under -Wall -Wextra -Werror and ASan + UBSan.

The examples and three models from outside this project (two from the onnx package's zoo,
one transformers export) are built for the `c` host with no march, so every ISA level's
object is compiled with -Werror. Each library is linked, with the sanitizer runtimes, into a
small C driver (run_model.c) that creates the model, runs it twice and destroys it; it runs
at the baseline level and at the best level this CPU supports (BUILDGEN_MAX_ISA). Any
sanitizer report fails the run (-fno-sanitize-recover, LeakSanitizer on), and the outputs
must still match onnxruntime.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "corpus"))
from corpus_models import BY_NAME, feeds, manifest_inputs, model_path  # noqa: E402
from test_isa_dispatch import runnable_levels  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.uname().machine != "x86_64", reason="ISA levels are x86-64's"),
]

EXAMPLES = yaml.safe_load((REPO / "BUILD.yaml").read_text())["models"]
CORPUS = ("zoo_squeezenet", "zoo_inception_v1", "hf_bert")
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer"]
RTOL, ATOL = 1e-3, 1e-4


def _models() -> dict[str, tuple[Path, dict[str, list[int]]]]:
    models = {name: (REPO / e["source"], e["inputs"]) for name, e in EXAMPLES.items()}
    for name in CORPUS:
        models[name] = (model_path(BY_NAME[name]), manifest_inputs(BY_NAME[name]))
    return models


def _has_sanitizers() -> bool:
    cc = shutil.which("cc")
    if cc is None:
        return False
    probe = subprocess.run([cc, *SANITIZE, "-x", "c", "-", "-o", os.devnull],
                           input="int main(void) { return 0; }", capture_output=True, text=True)
    return probe.returncode == 0


@pytest.fixture(scope="module")
def sanitized_build(tmp_path_factory: pytest.TempPathFactory, buildgen_build) -> Path:
    if not _has_sanitizers():
        pytest.skip("the C compiler has no ASan/UBSan runtime")
    folder = tmp_path_factory.mktemp("sanitize")
    target = {"kind": "c", "cflags": ["-Wextra", "-Werror", *SANITIZE], "ldflags": SANITIZE[:1]}
    manifest = folder / "BUILD.yaml"
    manifest.write_text(yaml.safe_dump({
        "buildgen": 1,
        "targets": {"checked": target},
        "models": {name: {"source": str(source), "inputs": inputs, "targets": ["checked"]}
                   for name, (source, inputs) in _models().items()},
    }))
    buildgen_build(manifest, folder / "build")
    return folder / "build"


def _driver(build: Path, name: str) -> Path:
    exe = build / f"run_{name}"
    lib = build / name / "checked"
    cmd = ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", *SANITIZE, f"-DMODEL={name}",
           f"-I{lib / 'include'}", str(REPO / "tests" / "e2e" / "run_model.c"),
           str(lib / f"lib{name}.a"), "-lm", "-o", str(exe)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return exe


def _inputs(name: str, source: Path) -> dict[str, np.ndarray]:
    if name in BY_NAME:
        return feeds(BY_NAME[name])
    import onnx

    rng = np.random.default_rng(0)
    graph = onnx.load(str(source)).graph
    shapes = EXAMPLES[name]["inputs"]
    return {i.name: rng.standard_normal(shapes[i.name]).astype(np.float32)
            for i in graph.input if i.name in shapes}


@pytest.mark.parametrize("name", sorted(_models()))
def test_runs_clean_under_asan_and_ubsan_at_every_level(sanitized_build: Path, name: str,
                                                        tmp_path: Path, onnxruntime_session):
    source = _models()[name][0]
    session = onnxruntime_session(source)
    inputs = _inputs(name, source)
    order = [i.name for i in session.get_inputs() if i.name in inputs]
    (tmp_path / "in.bin").write_bytes(b"".join(np.ascontiguousarray(inputs[n]).tobytes()
                                               for n in order))
    expected = session.run(None, {n: inputs[n] for n in order})
    exe = _driver(sanitized_build, name)
    for level in sorted({runnable_levels()[0], runnable_levels()[-1]}):
        env = {**os.environ, "BUILDGEN_MAX_ISA": level,
               "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0",
               "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
        done = subprocess.run([exe, tmp_path / "in.bin", tmp_path / "out.bin"], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-4000:]
        assert "runtime error" not in done.stderr and "Sanitizer" not in done.stderr
        assert f"cpu_isa {level}" in done.stderr
        data = (tmp_path / "out.bin").read_bytes()
        offset = 0
        for want in expected:
            got = np.frombuffer(data, want.dtype, count=want.size, offset=offset)
            got = got.reshape(want.shape)
            offset += want.nbytes
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
        assert offset == len(data)
