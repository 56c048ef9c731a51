"""`buildgen build` of the examples with a real REAPI service (BuildGrid) running the
compiles and the Python stages on the tests' workers: the libraries are the bytes a local
build makes, every compile and stage ran on a worker, a second checkout gets the service's
cached results, and a service that cannot be reached costs a warning, not the build."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from buildgen.cache.journal import read_entries

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TOKEN = "reapi-s3cret-41c7"
# The Python stages run on the workers too, with this interpreter (the bots share this
# machine's); the c kind's compiles ask for a property of their own (the bots have it).
STAGES_TOO = {"BUILDGEN_REMOTE_PYTHON": sys.executable, "BUILDGEN_REMOTE_PLATFORM_C": "pool=shared"}
STAGE_RULES = {"import", "partition", "codegen", "executor", "report", "shared_kernels",
               "link_kernels"}


@dataclass(frozen=True)
class Built:
    output: str  # what `buildgen build` printed
    libraries: dict[str, bytes]  # by path relative to the build dir
    outcomes: dict[str, str]  # action output -> outcome, from the journal
    rules: dict[str, str]  # action output -> rule


def _clone(dest: Path) -> Path:
    (dest / "examples").mkdir(parents=True)
    shutil.copy2(REPO / "BUILD.yaml", dest / "BUILD.yaml")
    shutil.copytree(REPO / "examples" / "models", dest / "examples" / "models")
    return dest


def _build(clone: Path, cache: Path, **env: str) -> Built:
    full = {k: v for k, v in os.environ.items() if not k.startswith("BUILDGEN_")}
    full["BUILDGEN_PREBUILT"] = "off"  # as tests/conftest.py says
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full.get("PYTHONPATH")]))
    full.update(BUILDGEN_CACHE_DIR=str(cache), **env)
    done = subprocess.run([sys.executable, "-m", "buildgen", "build", "-j", "4"], cwd=clone,
                          env=full, capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert TOKEN not in output
    build_dir = clone / "build"
    entries = list(read_entries(build_dir))
    return Built(
        output=output,
        libraries={str(p.relative_to(build_dir)): p.read_bytes()
                   for p in build_dir.rglob("lib*") if p.suffix in (".so", ".a")},
        outcomes={e.output: e.outcome for e in entries},
        rules={e.output: e.rule for e in entries},
    )


def _remote_env(service, **extra: str) -> dict[str, str]:
    return {"BUILDGEN_REMOTE_EXECUTOR": service.address,
            "BUILDGEN_REMOTE_INSTANCE": service.instance,
            "BUILDGEN_REMOTE_TOKEN": TOKEN, **extra}


def _compiles(built: Built) -> dict[str, str]:
    return _outcomes(built, {"cc"})


def _outcomes(built: Built, rules: set[str]) -> dict[str, str]:
    return {out: built.outcomes[out] for out, rule in built.rules.items() if rule in rules}


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Built:
    return _build(_clone(tmp_path_factory.mktemp("local")), tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def remote(reapi_service, tmp_path_factory) -> tuple[Built, int]:
    before = len(reapi_service.executed())
    built = _build(_clone(tmp_path_factory.mktemp("remote")), tmp_path_factory.mktemp("cache"),
                   **_remote_env(reapi_service), **STAGES_TOO)
    return built, len(reapi_service.executed()) - before


def test_a_remote_build_makes_the_local_bytes(local: Built, remote) -> None:
    built, _ = remote
    assert len(local.libraries) == 6  # a .so and a .a of each example
    assert built.libraries == local.libraries


def test_every_compile_and_stage_ran_on_a_worker(remote, reapi_service) -> None:
    built, ran_on_workers = remote
    compiles, stages = _compiles(built), _outcomes(built, STAGE_RULES)
    assert len(compiles) >= 10 and len(stages) >= 12
    assert set(compiles.values()) == set(stages.values()) == {"executed"}
    assert ran_on_workers == len(compiles) + len(stages)
    # the links and archives stayed here
    assert {o for out, o in built.outcomes.items() if out not in {*compiles, *stages}} == {"ran"}
    assert f"({ran_on_workers} on the executor)" in built.output
    records = reapi_service.executed()[-ran_on_workers:]
    compiled = [r for r in records if "-c" in r["argv"]]
    staged = [r for r in records if r["argv"][1:3] == ["-m", "buildgen.stages"]]
    assert len(compiled) == len(compiles) and len(staged) == len(stages)
    assert all("-MD" in r["argv"] and r["platform"].get("pool") == "shared" for r in compiled)
    runtime = reapi_service.bot_properties["buildgen-python"]
    # each stage imported the buildgen its input root held, on a worker with its runtime
    assert all(r["platform"] == {"buildgen-python": runtime} for r in staged)
    assert all(r["env"]["PYTHONPATH"] and r["argv"][0] == sys.executable for r in staged)


def test_a_second_checkout_gets_the_services_cached_results(remote, reapi_service,
                                                           tmp_path) -> None:
    """Another path, another empty local cache: the actions are the same (the keys do not
    name the checkout's path), so the service's action cache, the build's remote cache,
    answers for every one: the links and archives that ran here too."""
    first, _ = remote
    before = len(reapi_service.executed())
    built = _build(_clone(tmp_path / "deeper" / "clone"), tmp_path / "cache",
                   **_remote_env(reapi_service), **STAGES_TOO)
    assert set(_outcomes(built, {"ar", "link_shared"}).values()) == {"remote"}
    assert set(built.outcomes.values()) == {"remote"}
    assert len(reapi_service.executed()) == before
    assert built.libraries == first.libraries


def test_an_unreachable_executor_costs_a_warning_not_the_build(local: Built,
                                                              tmp_path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    built = _build(_clone(tmp_path / "clone"), tmp_path / "cache",
                   BUILDGEN_REMOTE_EXECUTOR=f"grpc://127.0.0.1:{port}")
    compiles = _compiles(built)
    assert set(compiles.values()) == {"fallback"}
    assert f"(0 on the executor, {len(compiles)} locally after the executor failed)" \
        in built.output
    assert f"warning: executor grpc://127.0.0.1:{port} was unreachable" in built.output
    assert built.libraries == local.libraries
