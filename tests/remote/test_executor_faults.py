"""Faults of remote execution, made for real by the tests' BuildGrid and its bots (bot.py's
--faults): a status the service answers instead of a result, a worker that dies holding
the action, an action past its timeout on the worker, a blob that fails its digest check
when downloaded. Each build is of a small model of its own (its own weights, so its
compiles are actions no other test sends: a corrupted blob stays in the service's storage),
and its library must be the bytes a local build of that model makes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from buildgen.cache.journal import read_entries

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Built:
    output: str
    library: bytes
    outcomes: dict[str, str]  # compile output -> outcome, from the journal


def _model(folder: Path, name: str) -> None:
    """x[4, 32] @ W + b, ReLU, with weights drawn from the test's name."""
    rng = np.random.default_rng(int(hashlib.sha256(name.encode()).hexdigest()[:8], 16))
    weight = numpy_helper.from_array(rng.standard_normal((32, 16)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]),
         helper.make_node("Add", ["xw", "b"], ["z"]),
         helper.make_node("Relu", ["z"], ["y"])],
        name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], [weight, bias])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              folder / f"{name}.onnx")
    # march pins one ISA: one compile of the model's module, whose command line names it
    (folder / "BUILD.yaml").write_text(
        "buildgen: 1\n"
        "targets:\n  t: {kind: c, march: x86-64}\n"
        f"models:\n  {name}: {{source: {name}.onnx, inputs: {{x: [4, 32]}}, targets: [t]}}\n")


def _build(folder: Path, name: str, cache: Path, **env: str) -> Built:
    full = {k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")}
    full["BUILDGEN_PREBUILT"] = "off"  # as tests/conftest.py says
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full.get("PYTHONPATH")]))
    full.update(BUILDGEN_CACHE_DIR=str(cache), **env)
    done = subprocess.run([sys.executable, "-m", "buildgen", "build", "-j", "4"], cwd=folder,
                          env=full, capture_output=True, text=True, check=False, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    build = folder / "build"
    return Built(output, (build / name / "t" / f"lib{name}.so").read_bytes(),
                 {e.output: e.outcome for e in read_entries(build) if e.rule == "cc"})


@pytest.fixture
def case(reapi_service, tmp_path: Path, request: pytest.FixtureRequest):
    """(name, build(**env) -> Built remotely, the local library's bytes); the faults a
    test injected and no lease took fail the test."""
    name = request.node.name.removeprefix("test_")[:40]
    local, remote = tmp_path / "local", tmp_path / "remote"
    for folder in (local, remote):
        folder.mkdir()
        _model(folder, name)
    library = _build(local, name, tmp_path / "local-cache").library
    environment = {"BUILDGEN_REMOTE_EXECUTOR": reapi_service.address,
                   "BUILDGEN_REMOTE_INSTANCE": reapi_service.instance}

    def build(**env: str) -> Built:
        return _build(remote, name, tmp_path / "remote-cache", **environment, **env)

    yield name, build, library
    assert reapi_service.clear_faults() == [], "a fault no lease took"


def _module(name: str) -> str:
    """The model's own module's object, as its compile command names it."""
    return f"{name}/t/obj/c.o"


def _records(service, match: str) -> list[dict[str, object]]:
    return [r for r in service.executed() if any(match in str(word) for word in r["argv"])]


def test_a_transient_status_is_retried_on_the_executor(case, reapi_service) -> None:
    name, build, library = case
    reapi_service.inject("status", _module(name), code="RESOURCE_EXHAUSTED")
    built = build()
    assert built.library == library
    assert built.outcomes[_module(name)] == "executed"
    assert [r.get("fault", "") for r in _records(reapi_service, _module(name))] == ["status", ""]
    assert "locally after the executor failed" not in built.output


def test_a_refused_action_runs_locally_and_the_rest_stays_remote(case, reapi_service) -> None:
    name, build, library = case
    reapi_service.inject("status", _module(name), code="PERMISSION_DENIED")
    built = build()
    assert built.library == library
    assert built.outcomes[_module(name)] == "fallback"
    others = {o for out, o in built.outcomes.items() if out != _module(name)}
    assert others <= {"executed", "remote"} and others
    assert len(_records(reapi_service, _module(name))) == 1  # refused: not sent again
    assert (f"{_module(name)}: ran locally, the executor failed (the action failed to run: "
            "PERMISSION_DENIED") in built.output
    assert "was unreachable" not in built.output


def test_a_worker_that_dies_holding_the_action_does_not_fail_the_build(case,
                                                                       reapi_service) -> None:
    """The bot restarts (as a crashed worker under a supervisor does); BuildGrid hands the
    action it held to a bot again, and the client's wait sees only the result."""
    name, build, library = case
    reapi_service.inject("die", _module(name))
    built = build()
    assert built.library == library
    assert built.outcomes[_module(name)] == "executed"
    assert [r.get("fault", "") for r in _records(reapi_service, _module(name))] == ["die", ""]


def test_an_action_past_its_timeout_runs_locally_at_once(case, reapi_service) -> None:
    name, build, library = case
    reapi_service.inject("slow", _module(name), seconds=30)
    built = build(BUILDGEN_REMOTE_TIMEOUT="4")
    assert built.library == library
    assert built.outcomes[_module(name)] == "fallback"
    assert len(_records(reapi_service, _module(name))) == 1  # a timeout is not retried
    assert (f"{_module(name)}: ran locally, the executor failed (the action timed out on "
            "the worker") in built.output
    assert "was unreachable" not in built.output


def test_an_output_that_fails_its_digest_check_is_never_written(case, reapi_service) -> None:
    """The stored object is corrupted after the worker uploads it. The client refuses it,
    has the action run again past the action cache (the server keeps the bad object), then
    builds locally; nothing of the remote attempts reaches the build dir."""
    name, build, library = case
    reapi_service.inject("corrupt", _module(name))
    built = build()
    assert built.library == library
    assert built.outcomes[_module(name)] == "fallback"
    assert len(_records(reapi_service, _module(name))) == 3  # executed again each attempt
    assert "does not match its digest" in built.output
    assert "after 3 attempts" in built.output
