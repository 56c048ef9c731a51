"""Every example model, on oneDNN + OpenBLAS + the c host, under every policy (priority,
cost from the committed records, cost from the analytic estimate, and with pins), matches
onnxruntime. The committed manifest examples/tuning/BUILD.yaml is the cost-policy one."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

import buildgen.runtime
from buildgen.cli import main
from buildgen.errors import BuildgenError

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TUNING = REPO / "examples" / "tuning"
MODELS = yaml.safe_load((TUNING / "BUILD.yaml").read_text())["models"]
POLICIES = {
    "priority": "{policy: priority}",
    "cost-records": f"{{policy: cost, records: {TUNING / 'cpu.records.json'}}}",
    "cost-analytic": "{policy: cost}",
}


def _cpu_libraries() -> None:
    """Skip where oneDNN or OpenBLAS is not installed (their rules find them at gen)."""
    from buildgen.targets import parse_target

    try:
        target = parse_target("x86-fast")
        for kind in target.backends:
            target.toolchain(kind)
    except BuildgenError as exc:
        pytest.skip(f"CPU libraries missing: {exc}")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _cpu_libraries()
    root = tmp_path_factory.mktemp("policies")
    models = []
    for policy, options in POLICIES.items():
        for name, spec in MODELS.items():
            source = (TUNING / spec["source"]).resolve()
            inputs = json.dumps(spec["inputs"])
            models.append(f"  {name}_{policy.replace('-', '_')}: {{source: {source}, "
                          f"inputs: {inputs}, targets: [cpu], partition: {options}}}")
    pinned = (f"  encoder_pinned: {{source: {(TUNING / MODELS['encoder']['source']).resolve()}"
              ", inputs: {x: [1, 128, 256]}, targets: [cpu], "
              'pin: {"op:Softmax": host, "re:/ff.*/MatMul": openblas}}')
    (root / "BUILD.yaml").write_text(textwrap.dedent("""\
        buildgen: 1
        targets:
          cpu: {tag: x86-fast}
        models:
        """) + "\n".join([*models, pinned]) + "\n")
    assert main(["build", "--manifest", str(root / "BUILD.yaml")]) == 0
    return root / "build"


CASES = [(m, p.replace("-", "_")) for m in sorted(MODELS) for p in POLICIES]


@pytest.mark.parametrize(("model", "policy"), [*CASES, ("encoder", "pinned")])
def test_example_matches_onnxruntime_under_policy(built: Path, model: str, policy: str) -> None:
    import onnxruntime as ort

    name = f"{model}_{policy}"
    compiled = buildgen.runtime.load(built / name / "cpu" / f"lib{name}.so")
    rng = np.random.default_rng(7)
    feeds = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in compiled.inputs}
    ours = compiled.run(feeds)
    session = ort.InferenceSession(str(TUNING / MODELS[model]["source"]),
                                   providers=["CPUExecutionProvider"])
    for (out, value), reference in zip(ours.items(), session.run(None, feeds), strict=True):
        np.testing.assert_allclose(value, reference, rtol=1e-3, atol=1e-4, err_msg=out)
    partition = json.loads((built / name / "cpu" / "partition.json").read_text())
    targets = {r["target"] for r in partition["regions"]}
    assert targets <= {"onednn", "openblas", "c"} and len(targets) >= 1
    if policy == "cost_records":
        assert any("tuning record cpu.records.json" in r["reason"]
                   for r in partition["regions"])
    if policy == "pinned":
        on = {n: r["target"] for r in partition["regions"] for n in r["nodes"]}
        assert on["/Softmax"] == "c" and on["/ff1/MatMul"] == "openblas"
