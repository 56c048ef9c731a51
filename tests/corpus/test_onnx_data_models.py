"""The onnx package's own exported models: pytorch-converted, pytorch-operator and simple.

These are small models PyTorch's early exporter wrote (many at opset 6, whose PRelu slope
is per channel) and hand-made ones, each with inputs and the reference outputs in
test_data_set_0. None was written here. Every one in scope builds for the `c` host and the
composite CPU target (in-process, through buildgen.stages, as the node tests are) and
matches the reference outputs; a composite build whose every region is the host's is the
`c` build again and is not repeated. Out of scope, with the reason printed: a non-float32 model
(double tensors), a training op (Gradient, another domain), sequence ops or strings.
"""

from __future__ import annotations

import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

pytestmark = pytest.mark.slow

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
FOLDERS = ("pytorch-converted", "pytorch-operator", "simple")
# TensorProto element types buildgen takes: FLOAT, INT32, INT64, BOOL.
_TAKEN = frozenset({1, 6, 7, 9})
TARGETS = {
    "c": {"kind": "c", "march": "native"},
    "cpu": {"kind": "composite", "host": {"kind": "c", "march": "native"},
            "accelerators": [{"kind": "onednn"}, {"kind": "openblas"}]},
}
RTOL, ATOL = 1e-4, 1e-5


@dataclass(frozen=True)
class DataModel:
    folder: Path

    @property
    def label(self) -> str:
        return f"{self.folder.parent.name}/{self.folder.name}"

    @property
    def name(self) -> str:
        return "m_" + re.sub(r"[^A-Za-z0-9_]", "_", self.folder.name.removeprefix("test_"))

    def arrays(self, kind: str) -> list[np.ndarray]:
        files = (self.folder / "test_data_set_0").glob(f"{kind}_*.pb")
        arrays = []
        for path in sorted(files, key=lambda p: int(p.stem.split("_")[1])):
            tensor = onnx.TensorProto()
            tensor.ParseFromString(path.read_bytes())
            arrays.append(numpy_helper.to_array(tensor))
        return arrays


def out_of_scope(model: onnx.ModelProto) -> str | None:
    """Why buildgen does not take this model, or None."""
    initializers = {t.name for t in model.graph.initializer}
    for value in [*model.graph.input, *model.graph.output]:
        if value.name in initializers:
            continue
        if not value.type.HasField("tensor_type"):
            return f"'{value.name}' is not a tensor"
        if value.type.tensor_type.elem_type not in _TAKEN:
            return f"'{value.name}' has element type {value.type.tensor_type.elem_type}"
    domains = {n.domain for n in model.graph.node} - {"", "ai.onnx"}
    if domains:
        return f"ops of domain {sorted(domains)}"
    sequences = sorted({n.op_type for n in model.graph.node if "Sequence" in n.op_type})
    return f"sequence ops {sequences} (buildgen takes tensors only)" if sequences else None


def _collect() -> tuple[list[DataModel], dict[str, str]]:
    taken: list[DataModel] = []
    left: dict[str, str] = {}
    for folder in FOLDERS:
        for path in sorted((DATA / folder).iterdir()):
            if not (path / "model.onnx").exists():
                continue
            model = DataModel(path)
            reason = out_of_scope(onnx.load(str(path / "model.onnx"), load_external_data=False))
            if reason:
                left[model.label] = reason
            else:
                taken.append(model)
    return taken, left


TAKEN, LEFT = _collect()


def build_and_run(model: DataModel, target: str, out: Path) -> str | None:
    """None when the library matches the reference outputs, else what went wrong."""
    from buildgen import runtime, stages
    from buildgen.errors import BuildgenError

    proto = onnx.load(str(model.folder / "model.onnx"))
    initializers = {t.name for t in proto.graph.initializer}
    names = [i.name for i in proto.graph.input if i.name not in initializers]
    inputs = dict(zip(names, model.arrays("input"), strict=True))
    try:
        imported = stages.import_model(model.folder / "model.onnx",
                                       {k: list(v.shape) for k, v in inputs.items()},
                                       name=model.name)
        resolved = stages.resolve_target(TARGETS[target])
        partition = stages.partition(imported.graph, resolved, model=model.name)
        if target != "c" and all(r.target == "c" for r in partition.regions):
            return None  # the same library as the `c` build, which is checked
        library = stages.build_library(out / target / model.name, model.name, imported,
                                       partition, resolved, kernels_dir=out / "_shared")
    except BuildgenError as exc:
        return str(exc).splitlines()[0]
    compiled = runtime.load(library)
    try:
        got = compiled.run(inputs)
    finally:
        compiled.close()
    for info, want in zip(compiled.outputs, model.arrays("output"), strict=True):
        ours = got[info.name]
        if ours.shape != want.shape:
            return f"output '{info.name}': shape {ours.shape}, expected {want.shape}"
        if not np.allclose(ours, want, rtol=RTOL, atol=ATOL, equal_nan=True):
            worst = float(np.nanmax(np.abs(ours.astype(np.float64) - want)))
            return f"output '{info.name}' differs by up to {worst:.3g}"
    return None


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str | None]:
    out = tmp_path_factory.mktemp("onnx-data")
    jobs = [(m, t) for m in TAKEN for t in TARGETS]
    with ProcessPoolExecutor(max_workers=2) as pool:
        futures = {(m.label, t): pool.submit(build_and_run, m, t, out) for m, t in jobs}
        results = {key: future.result() for key, future in futures.items()}
    print(f"\n{len(TAKEN)} models in scope, {len(LEFT)} out of scope:")
    for label, reason in LEFT.items():
        print(f"  {label}: {reason}")
    return results


def test_the_scope_is_most_of_the_models() -> None:
    assert len(TAKEN) >= 100, LEFT
    assert all(any(w in r for w in ("element type", "not a tensor", "domain", "sequence"))
               for r in LEFT.values())


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_model_in_scope_matches(outcomes, target: str) -> None:
    failed = {label: error for (label, t), error in outcomes.items()
              if t == target and error is not None}
    assert not failed, "\n".join(f"{k}: {v}" for k, v in sorted(failed.items()))
