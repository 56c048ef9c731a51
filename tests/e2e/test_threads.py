"""`threads: N` on the `c` host: a thread pool per model instance (bg_threads.h).

One build of the examples and of models not shaped alongside buildgen (the onnx zoo's
SqueezeNet, a CNN+LSTM recogniser shipped on PyPI, a transformers BERT export) for
`{kind: c, threads: 3}`. Every model must give the same bits on 3 threads as on 1
(BUILDGEN_NUM_THREADS=1, read at create) and match onnxruntime; the pool's threads exist
while an instance lives and are joined when it is destroyed; two instances run at once
from two threads of the caller without disturbing each other.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from buildgen import runtime

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "corpus"))
from corpus_models import BY_NAME, feeds, manifest_inputs, model_path  # noqa: E402

EXAMPLES = yaml.safe_load((REPO / "BUILD.yaml").read_text())["models"]
OUTSIDE = ("zoo_squeezenet", "captcha_rec", "hf_bert")
# Also built beside oneDNN, whose libgomp then runs the host's pool (BG_THREADS_OPENMP)
ON_OPENMP = ("zoo_squeezenet", "captcha_rec")
RTOL, ATOL = 1e-3, 1e-4

pytestmark = pytest.mark.slow


def _models() -> dict[str, tuple[Path, dict[str, list[int]]]]:
    models = {name: (REPO / e["source"], e["inputs"]) for name, e in EXAMPLES.items()}
    for name in OUTSIDE:
        models[name] = (model_path(BY_NAME[name]), manifest_inputs(BY_NAME[name]))
    return models


@pytest.fixture(scope="module")
def threads_build(tmp_path_factory: pytest.TempPathFactory, buildgen_build) -> Path:
    folder = tmp_path_factory.mktemp("threads")
    entries = {
        name: {"source": str(source), "inputs": inputs, "targets": ["three"]}
        for name, (source, inputs) in _models().items()
    }
    entries["mlp"]["targets"] = ["three", "every"]
    for name in ON_OPENMP:
        entries[name]["targets"] = ["three", "with_onednn"]
    manifest = folder / "BUILD.yaml"
    manifest.write_text(yaml.safe_dump({
        "buildgen": 1,
        "targets": {
            "three": {"kind": "c", "march": "native", "threads": 3},
            "every": {"kind": "c", "march": "native", "threads": 0},
            "with_onednn": {"kind": "composite",
                            "host": {"kind": "c", "march": "native", "threads": 3},
                            "accelerators": [{"kind": "onednn", "threads": 3}]},
        },
        "models": entries,
    }))
    buildgen_build(manifest, folder / "build")
    return folder / "build"


def _inputs(name: str, compiled: runtime.CompiledModel) -> dict[str, np.ndarray]:
    if name in BY_NAME:
        return feeds(BY_NAME[name])
    rng = np.random.default_rng(0)
    return {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in compiled.inputs}


def _threads_of_this_process() -> int:
    return len(list(Path("/proc/self/task").iterdir()))


def _threads_once_settled(expected: int) -> int:
    """The process's thread count once it reaches `expected`, or after 10 s. pthread_join
    returns when the kernel clears the thread's id, a moment before it drops the thread
    from /proc/self/task: on a busy machine a joined worker is still listed for a while."""
    deadline = time.monotonic() + 10.0
    while (count := _threads_of_this_process()) != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return count


@pytest.mark.parametrize(("name", "target"), [*((n, "three") for n in sorted(_models())),
                                             *((n, "with_onednn") for n in ON_OPENMP)])
def test_three_threads_give_the_bits_of_one(threads_build: Path, monkeypatch: pytest.MonkeyPatch,
                                            name: str, target: str, onnxruntime_outputs) -> None:
    library = threads_build / name / target / f"lib{name}.so"
    monkeypatch.delenv("BUILDGEN_NUM_THREADS", raising=False)
    three = runtime.load(library)
    monkeypatch.setenv("BUILDGEN_NUM_THREADS", "1")
    one = runtime.load(library)
    inputs = _inputs(name, one)
    ours_three, ours_one = three.run(inputs), one.run(inputs)
    three.close()
    one.close()
    source = _models()[name][0]
    for out, expected in zip(one.output_names, onnxruntime_outputs(source, inputs), strict=True):
        assert ours_three[out].tobytes() == ours_one[out].tobytes(), out
        np.testing.assert_allclose(ours_one[out], expected, rtol=RTOL, atol=ATOL, err_msg=out)


def test_the_pool_lives_with_its_instance(threads_build: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BUILDGEN_NUM_THREADS", raising=False)
    before = _threads_of_this_process()
    compiled = runtime.load(threads_build / "encoder" / "three" / "libencoder.so")
    assert _threads_once_settled(before + 2) == before + 2  # the caller's thread is the third
    compiled.close()
    assert _threads_once_settled(before) == before
    monkeypatch.setenv("BUILDGEN_NUM_THREADS", "5")
    compiled = runtime.load(threads_build / "encoder" / "three" / "libencoder.so")
    assert _threads_once_settled(before + 4) == before + 4
    compiled.close()


def test_threads_0_is_every_cpu_this_process_may_use(threads_build: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.delenv("BUILDGEN_NUM_THREADS", raising=False)
    before = _threads_of_this_process()
    compiled = runtime.load(threads_build / "mlp" / "every" / "libmlp.so")
    assert _threads_of_this_process() == before + len(os.sched_getaffinity(0)) - 1
    compiled.close()
    source = (threads_build / "mlp" / "every" / "src" / "c.c").read_text()
    assert " * Threads: every CPU (BUILDGEN_NUM_THREADS overrides)" in source


@pytest.mark.parametrize("value", ["abc", "0", "-2", "100000", "3x"])
def test_a_bad_thread_count_in_the_environment_fails_create(
        threads_build: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("BUILDGEN_NUM_THREADS", value)
    with pytest.raises(runtime.ModelError,
                       match=rf"BUILDGEN_NUM_THREADS={value} is not a thread count \(1 \.\. 256\)"):
        runtime.load(threads_build / "mlp" / "three" / "libmlp.so")


def test_two_instances_run_at_once(threads_build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each instance owns its pool: two callers running two instances concurrently (ctypes
    releases the GIL) get the results one instance gives alone."""
    monkeypatch.delenv("BUILDGEN_NUM_THREADS", raising=False)
    library = threads_build / "zoo_squeezenet" / "three" / "libzoo_squeezenet.so"
    first, second = runtime.load(library), runtime.load(library)
    inputs = [feeds(BY_NAME["zoo_squeezenet"], seed) for seed in (1, 2)]
    expected = [first.run(x) for x in inputs]
    results: dict[int, list[dict[str, np.ndarray]]] = {0: [], 1: []}

    def work(index: int, model: runtime.CompiledModel) -> None:
        for _ in range(5):
            results[index].append(model.run(inputs[index]))

    workers = [threading.Thread(target=work, args=(i, m)) for i, m in enumerate((first, second))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    first.close()
    second.close()
    for index in (0, 1):
        assert len(results[index]) == 5
        for got in results[index]:
            for out, value in got.items():
                assert value.tobytes() == expected[index][out].tobytes(), out


def test_beside_onednn_the_pool_runs_on_openmp(threads_build: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's modules are built for OpenMP beside oneDNN (libgomp) and start no threads of
    their own; alone, they keep their pthreads pool."""
    flags = _compile_flags(threads_build / "build.ninja")
    for obj in ("captcha_rec/with_onednn/obj/model.o", "captcha_rec/with_onednn/obj/c.o"):
        assert {"-fopenmp", "-DBG_THREADS_OPENMP"} <= set(flags.get(obj, "").split()), obj
    assert "-fopenmp" not in flags["captcha_rec/three/obj/model.o"]
    monkeypatch.delenv("BUILDGEN_NUM_THREADS", raising=False)
    library = threads_build / "captcha_rec" / "with_onednn" / "libcaptcha_rec.so"
    first = runtime.load(library)
    inputs = _inputs("captcha_rec", first)
    first.run(inputs)  # libgomp's team of 3 exists from here on
    time.sleep(0.2)  # threads earlier tests joined leave /proc/self/task
    with_first = _threads_of_this_process()
    second = runtime.load(library)
    second.run(inputs)
    # A pool of its own would hold 2 more threads while `second` lives; the team is shared.
    assert _threads_of_this_process() <= with_first
    second.close()
    first.close()


def _compile_flags(build_ninja: Path) -> dict[str, str]:
    """Each compile's output -> its `cflags` line, from build.ninja."""
    flags: dict[str, str] = {}
    output = ""
    for line in build_ninja.read_text().splitlines():
        if line.startswith("build "):
            output = line[len("build "):].split(":", 1)[0].split(" ")[0]
        elif line.startswith("  cflags = ") and output:
            flags[output] = line[len("  cflags = "):]
    return flags
